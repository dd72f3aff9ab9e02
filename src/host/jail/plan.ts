import { isAbsolute, normalize, relative } from 'node:path';
import { ProofgateError } from '../../core/index.js';
import type { JailLimits, UntrustedRequest } from './types.js';

/**
 * The jail as an argv (pure): `prlimit` sets the rlimits, `setpriv` drops
 * root to the jail's uid (only when proofgate runs as root), and bubblewrap
 * builds the namespaces and the file system view. bubblewrap itself then runs
 * unprivileged, so it must create a user namespace, and `--disable-userns`
 * stops the job from creating further ones.
 */

/** The unprivileged uid and gid a job runs as when proofgate runs as root (`nobody`). */
export const JAIL_UID = 65534;
export const JAIL_GID = 65534;

export const DEFAULT_LIMITS: JailLimits = {
  memoryBytes: 4 * 1024 ** 3,
  processes: 512,
  cpuSeconds: 600,
  fileBytes: 1024 ** 3,
  tmpBytes: 512 * 1024 ** 2,
};

/** What of /etc a job sees: name lookup, libraries, certificates, time zones, the alternatives symlinks /usr/bin uses. Never shadow, gshadow, npmrc, pip.conf or other files that may hold secrets. */
export const ETC_ALLOW = [
  'alternatives',
  'ca-certificates',
  'ca-certificates.conf',
  'ssl',
  'pki',
  'crypto-policies',
  'ld.so.cache',
  'ld.so.conf',
  'ld.so.conf.d',
  'localtime',
  'timezone',
  'nsswitch.conf',
  'passwd',
  'group',
  'hosts',
  'host.conf',
  'gai.conf',
  'protocols',
  'services',
  'networks',
  'mime.types',
  'magic',
  'magic.mime',
  'os-release',
  'debian_version',
  'shells',
  'terminfo',
  'inputrc',
  'locale.alias',
  'perl',
  'python3',
  'java-17-openjdk',
  'java-21-openjdk',
] as const;

/** How the top-level system directories look on this machine: a merged-/usr link (`bin -> usr/bin`) or a directory. */
export type SystemLayout = readonly { readonly name: string; readonly link: string | null }[];

/** Absolute paths of the programs the jail is made of (found on proofgate's PATH). */
export interface JailTools {
  readonly prlimit: string;
  readonly setpriv: string;
  readonly bwrap: string;
  readonly slirp4netns: string;
}

export interface JailPlanInput {
  readonly request: UntrustedRequest;
  readonly layout: SystemLayout;
  readonly tools: JailTools;
  /** Drop to JAIL_UID with setpriv (proofgate runs as root). */
  readonly dropRoot: boolean;
  /** The fd bubblewrap reports the host pid of the job's namespace init on (`--info-fd`). */
  readonly infoFd?: number;
  /** With network: the resolv.conf naming slirp4netns's DNS, and the fd bubblewrap waits on before the job starts. */
  readonly network?: { readonly resolvConf: string; readonly blockFd: number };
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const SYSTEM_ROOTS = new Set([
  '/',
  '/usr',
  '/etc',
  '/proc',
  '/dev',
  '/tmp',
  '/sys',
  '/bin',
  '/sbin',
  '/lib',
  '/lib64',
  '/run',
  '/var',
  '/boot',
  '/root',
  '/home',
]);

function invalid(message: string): ProofgateError {
  return new ProofgateError('INVALID_INPUT', `jail: ${message}`);
}

/** An absolute, normalized host path that is not a system directory itself. */
function hostPath(path: string, what: string): string {
  if (!isAbsolute(path) || path.includes('\0')) throw invalid(`${what} must be an absolute path: ${JSON.stringify(path)}`);
  const clean = normalize(path).replace(/\/+$/, '') || '/';
  if (SYSTEM_ROOTS.has(clean)) throw invalid(`${what} may not be the system directory ${clean}`);
  return clean;
}

export function isInside(parent: string, child: string): boolean {
  const rel = relative(parent, child);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

export function effectiveLimits(limits: Partial<JailLimits> | undefined): JailLimits {
  const merged = { ...DEFAULT_LIMITS, ...limits };
  for (const [name, value] of Object.entries(merged)) {
    if (!Number.isSafeInteger(value) || value <= 0) throw invalid(`limit ${name} must be a positive integer`);
  }
  return merged;
}

/** The writable and read-only binds of a job, parents before children. */
export function jobBinds(request: UntrustedRequest): { path: string; writable: boolean }[] {
  const binds = [{ path: hostPath(request.jobDir, 'jobDir'), writable: true }];
  for (const mount of request.mounts ?? []) binds.push({ path: hostPath(mount.path, 'mount'), writable: mount.writable });
  if (request.cacheDir !== undefined) binds.push({ path: hostPath(request.cacheDir, 'cacheDir'), writable: true });
  return binds.sort((a, b) => a.path.split('/').length - b.path.split('/').length);
}

/** Check the request's paths and environment names; returns the working directory. */
export function checkRequest(request: UntrustedRequest): string {
  if (request.argv.length === 0 || request.argv[0] === '') throw invalid('empty command');
  const binds = jobBinds(request);
  const cwd = hostPath(request.cwd, 'cwd');
  if (!binds.some((bind) => isInside(bind.path, cwd))) throw invalid(`cwd ${cwd} is not inside the job directory or a mount`);
  for (const name of Object.keys(request.env)) {
    if (!ENV_NAME.test(name)) throw invalid(`bad environment variable name ${JSON.stringify(name)}`);
    if (request.env[name]?.includes('\0') === true) throw invalid(`environment variable ${name} holds a NUL byte`);
  }
  return cwd;
}

/** The full argv that runs `request` jailed. */
export function jailArgv(input: JailPlanInput): string[] {
  const { request, layout, network } = input;
  const cwd = checkRequest(request);
  const limits = effectiveLimits(request.limits);
  const argv = [
    input.tools.prlimit,
    `--nproc=${limits.processes}`,
    `--cpu=${limits.cpuSeconds}`,
    `--fsize=${limits.fileBytes}`,
    `--data=${limits.memoryBytes}`,
    '--core=0',
    '--',
  ];
  if (input.dropRoot) argv.push(input.tools.setpriv, `--reuid=${JAIL_UID}`, `--regid=${JAIL_GID}`, '--clear-groups', '--');
  argv.push(
    input.tools.bwrap,
    '--unshare-all',
    '--unshare-user',
    '--disable-userns',
    '--die-with-parent',
    '--new-session',
    '--cap-drop',
    'ALL',
    '--hostname',
    'proofgate-job',
  );
  if (input.infoFd !== undefined) argv.push('--info-fd', String(input.infoFd));
  if (network !== undefined) argv.push('--block-fd', String(network.blockFd));
  argv.push('--ro-bind', '/usr', '/usr');
  for (const entry of layout) {
    if (entry.link !== null) argv.push('--symlink', entry.link, `/${entry.name}`);
    else argv.push('--ro-bind-try', `/${entry.name}`, `/${entry.name}`);
  }
  for (const name of ETC_ALLOW) argv.push('--ro-bind-try', `/etc/${name}`, `/etc/${name}`);
  if (network !== undefined) argv.push('--ro-bind', network.resolvConf, '/etc/resolv.conf');
  argv.push('--proc', '/proc', '--dev', '/dev');
  argv.push('--size', String(limits.tmpBytes), '--tmpfs', '/tmp', '--size', String(limits.tmpBytes), '--tmpfs', '/dev/shm');
  for (const bind of jobBinds(request)) argv.push(bind.writable ? '--bind' : '--ro-bind', bind.path, bind.path);
  // The root and /dev are tmpfs the job's uid owns: make them read-only so nothing but the binds and the sized tmpfs take writes.
  argv.push('--remount-ro', '/', '--remount-ro', '/dev');
  argv.push('--chdir', cwd, '--clearenv');
  for (const [name, value] of Object.entries(request.env)) argv.push('--setenv', name, value);
  argv.push('--', ...request.argv);
  return argv;
}

/** The environment bubblewrap itself runs with: only a search path (inside, /proc/1/environ shows it). */
export const BWRAP_ENV: Readonly<Record<string, string>> = { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' };
