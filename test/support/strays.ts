import { readFileSync, readdirSync, readlinkSync } from 'node:fs';

/**
 * Finding processes a test run left behind, from /proc (Linux; elsewhere the
 * list is empty). A process belongs to the run when its environment carries
 * the run's marker (`name=value`) or its working directory is inside the
 * run's temporary folder: the test harness sets both for every worker, so
 * whatever a test starts has one of them, unless it was started with a
 * cleared environment *and* outside the temporary folder.
 */
export interface StrayProcess {
  readonly pid: number;
  readonly ppid: number;
  readonly pgid: number;
  readonly command: string;
  readonly cwd: string;
}

interface ProcStat {
  readonly state: string;
  readonly ppid: number;
  readonly pgid: number;
}

function readStat(pid: number): ProcStat | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name is in parentheses and may itself contain spaces or parentheses.
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { state: fields[0] ?? '?', ppid: Number(fields[1]), pgid: Number(fields[2]) };
  } catch {
    return null;
  }
}

function readOr(read: () => string, fallback: string): string {
  try {
    return read();
  } catch {
    return fallback;
  }
}

export interface StrayQuery {
  /** The marker as it appears in the environment, e.g. `PROOFGATE_TEST_RUN=abc`. */
  readonly marker: string;
  /** The run's temporary folder (a cwd at or under it belongs to the run). */
  readonly root: string;
  /** Processes that may carry the marker and are not strays (the runner and its workers). */
  readonly exclude: (pid: number, stat: { ppid: number; command: string }) => boolean;
}

/** Live processes (zombies are already dead) that belong to the run. */
export function findRunProcesses(query: StrayQuery): StrayProcess[] {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  const marker = `\0${query.marker}\0`;
  const found: StrayProcess[] = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === process.pid) continue;
    const stat = readStat(pid);
    if (stat === null || stat.state === 'Z' || stat.state === 'X') continue;
    const cwd = readOr(() => readlinkSync(`/proc/${pid}/cwd`), '');
    const inRoot = cwd === query.root || cwd.startsWith(`${query.root}/`);
    if (!inRoot && !`\0${readOr(() => readFileSync(`/proc/${pid}/environ`, 'latin1'), '')}`.includes(marker)) continue;
    const command = readOr(
      () =>
        readFileSync(`/proc/${pid}/cmdline`, 'utf8')
          .split('\0')
          .filter((part) => part !== '')
          .join(' '),
      '?',
    );
    if (query.exclude(pid, { ppid: stat.ppid, command })) continue;
    found.push({ pid, ppid: stat.ppid, pgid: stat.pgid, command, cwd });
  }
  return found;
}

/**
 * SIGKILL each process, and its process group unless that is the caller's own
 * group (a stray started without a group of its own shares the runner's).
 */
export function killProcesses(processes: readonly StrayProcess[]): void {
  const ownGroup = readStat(process.pid)?.pgid;
  for (const stray of processes) {
    const targets = stray.pgid > 1 && stray.pgid !== ownGroup ? [-stray.pgid, stray.pid] : [stray.pid];
    for (const target of targets) {
      try {
        process.kill(target, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
}

/** The environment variables the run guard (test/support/run-guard.ts) sets for the whole run. */
export const RUN_MARKER = 'PROOFGATE_TEST_RUN';
export const RUN_ROOT = 'PROOFGATE_TEST_RUN_ROOT';

/**
 * In the test runner's main process: find the processes this run left
 * behind, kill them and return them (empty outside a guarded run). The
 * runner's own workers (its direct children) are not strays.
 */
export function collectStrays(): StrayProcess[] {
  const marker = process.env[RUN_MARKER];
  const root = process.env[RUN_ROOT];
  if (marker === undefined || root === undefined) return [];
  const strays = findRunProcesses({ marker: `${RUN_MARKER}=${marker}`, root, exclude: (_pid, stat) => stat.ppid === process.pid });
  killProcesses(strays);
  return strays;
}

/** One paragraph naming each stray, for the end of the run's output. */
export function describeStrays(strays: readonly StrayProcess[]): string {
  const lines = strays.map(
    (stray) => `  pid ${stray.pid} (parent ${stray.ppid}, group ${stray.pgid}, cwd ${stray.cwd || '?'}): ${stray.command.slice(0, 300)}`,
  );
  return `\nFAIL: the tests left ${strays.length} process${strays.length === 1 ? '' : 'es'} running (now killed):\n${lines.join('\n')}\n`;
}
