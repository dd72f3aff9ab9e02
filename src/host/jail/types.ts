import type { ProcessRequest, ProcessResult } from '../process.js';

/** `jail` runs under bubblewrap; `none` runs the program plainly (only when the trusted config says `sandbox: none`). */
export type SandboxMode = 'jail' | 'none';

export interface JailMount {
  /** A host path; it appears inside the jail at the SAME path (so callers use one path in both modes). */
  readonly path: string;
  readonly writable: boolean;
}

export interface JailLimits {
  /** Private data memory of each process (RLIMIT_DATA; see docs/forge.md for why not the address space). */
  readonly memoryBytes: number;
  /** Processes and threads of the jail's uid (RLIMIT_NPROC). */
  readonly processes: number;
  /** CPU time of each process (RLIMIT_CPU); wall time is `timeoutMs`. */
  readonly cpuSeconds: number;
  /** Largest file a process may write (RLIMIT_FSIZE). */
  readonly fileBytes: number;
  /** Size of the private /tmp and /dev/shm tmpfs, each. */
  readonly tmpBytes: number;
}

/** Time limit, output caps, stdin, abort and kill grace mean what they mean for the process runner. */
export interface UntrustedRequest extends Pick<ProcessRequest, 'timeoutMs' | 'output' | 'stderr' | 'stdin' | 'signal' | 'killGraceMs'> {
  readonly argv: readonly string[];
  /** 'jail' runs under bubblewrap; 'none' (only when the trusted config says `sandbox: none`) runs it plainly. */
  readonly sandbox: SandboxMode;
  /** The job's own directory on the host: the only writable tree (besides `mounts` marked writable and `cacheDir`). */
  readonly jobDir: string;
  /** Working directory: a path inside jobDir (or inside a mount). */
  readonly cwd: string;
  /** The complete environment of the program inside: nothing else is inherited (HOME/TMPDIR should point into jobDir). */
  readonly env: Readonly<Record<string, string>>;
  /** Extra host paths made visible at the same path, read-only unless `writable`. */
  readonly mounts?: readonly JailMount[];
  /** A shared cache directory named by the trusted config (writable, never proofgate's state). */
  readonly cacheDir?: string;
  /** Outbound network through slirp4netns with the host loopback cut off; default false (no network at all). */
  readonly network?: boolean;
  readonly limits?: Partial<JailLimits>;
}

export interface UntrustedResult extends ProcessResult {
  /** How it actually ran: 'jail', or 'none' when the trusted config said sandbox: none. */
  readonly sandbox: SandboxMode;
}

export type JailStatus = { readonly available: true } | { readonly available: false; readonly reason: string };
