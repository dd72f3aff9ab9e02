/** Send `signal` to the process group led by `pid`; a group that is gone (or no pid: a start that failed) is no error. */
export function killGroup(pid: number | null | undefined, signal: NodeJS.Signals): void {
  if (pid === undefined || pid === null) return;
  try {
    process.kill(-pid, signal);
  } catch {
    // The group is already gone.
  }
}
