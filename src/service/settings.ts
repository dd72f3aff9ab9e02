/**
 * The settings of `proofgate serve`: the GitHub App (from the environment),
 * where state lives and the shared marker secret, and the command's flags.
 *
 * `serviceSettingsFrom` and `serveOptionsFrom` are pure: they read an
 * environment object handed to them (never `process.env`) and either return a
 * typed value or throw ONE `ProofgateError` whose one-line message names the
 * setting at fault. A message names a variable or a flag, never its value: a
 * misplaced key, a secret or a password inside a database URL must not reach
 * a log. The one effect, reading the key file of
 * `PROOFGATE_GITHUB_PRIVATE_KEY_FILE`, is a function the caller may pass in
 * (`readKeyFile`, default: read the file as UTF-8).
 *
 * Rules: with none of the GitHub variables set, GitHub is off and the service
 * serves local repositories only; with some of them set, every one of the app
 * id, the key (text or file) and the webhook secret is required, and the first
 * missing one is named. A variable that is set to the empty string counts as
 * set, and is refused as empty (an empty secret is never a default).
 *
 * zod is not used here: each check is one test with its own sentence, and the
 * error must be exactly one line naming the variable, which hand-written
 * checks say more plainly than a schema's issue list would.
 */
import { createPrivateKey } from 'node:crypto';
import { closeSync, constants, fstatSync, openSync, readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { ProofgateError } from '../core/index.js';

/** An environment: `process.env` in the command, a plain object in tests. */
export type Environment = Readonly<Record<string, string | undefined>>;

/** The environment variables of the service, by role. */
export const SETTING = {
  appId: 'PROOFGATE_GITHUB_APP_ID',
  privateKey: 'PROOFGATE_GITHUB_PRIVATE_KEY',
  privateKeyFile: 'PROOFGATE_GITHUB_PRIVATE_KEY_FILE',
  webhookSecret: 'PROOFGATE_GITHUB_WEBHOOK_SECRET',
  apiUrl: 'PROOFGATE_GITHUB_API_URL',
  databaseUrl: 'PROOFGATE_DATABASE_URL',
  markerSecret: 'PROOFGATE_MARKER_SECRET',
  dataDir: 'PROOFGATE_DATA_DIR',
} as const;

/** github.com's REST API; GitHub Enterprise Server answers at `https://HOST/api/v3`. */
export const DEFAULT_GITHUB_API_URL = 'https://api.github.com';

/** The fewest bytes a marker secret may have (given as hex: twice as many digits). */
export const MARKER_SECRET_MIN_BYTES = 32;

/** The variables whose presence turns GitHub on (any one of them). */
const GITHUB_VARIABLES = [SETTING.appId, SETTING.privateKey, SETTING.privateKeyFile, SETTING.webhookSecret, SETTING.apiUrl] as const;

export interface GitHubAppSettings {
  /** The App's numeric id. */
  readonly appId: number;
  /** The App's private key, PEM text that node:crypto reads as an RSA private key. */
  readonly privateKey: string;
  /** Where the key came from: the variable's text, or the file it names. */
  readonly privateKeySource: { readonly kind: 'env' } | { readonly kind: 'file'; readonly path: string };
  /** The secret GitHub signs webhook deliveries with. */
  readonly webhookSecret: string;
  /** REST base URL without a trailing slash (default https://api.github.com). */
  readonly apiUrl: string;
}

export interface ServiceSettings {
  /** The GitHub App, or null: no GitHub variable is set, only local repositories are served. */
  readonly github: GitHubAppSettings | null;
  /** `PROOFGATE_DATABASE_URL`: a PostgreSQL URL, or null (the embedded SQLite store). */
  readonly databaseUrl: string | null;
  /** `PROOFGATE_MARKER_SECRET` decoded from hex, or null (the secret kept in the store is used). */
  readonly markerSecret: Uint8Array | null;
  /** `PROOFGATE_DATA_DIR`, as given, or null. */
  readonly dataDir: string | null;
}

export interface SettingsEffects {
  /** Read the key file named by `PROOFGATE_GITHUB_PRIVATE_KEY_FILE` (default: the file as UTF-8). */
  readonly readKeyFile?: (path: string) => string;
}

function configError(message: string, setting: string): ProofgateError {
  return new ProofgateError('CONFIG', message, { setting });
}

/** A variable's value, or undefined when the variable is not in the environment at all. */
function valueOf(env: Environment, name: string): string | undefined {
  return Object.prototype.hasOwnProperty.call(env, name) ? env[name] : undefined;
}

function nonEmpty(env: Environment, name: string): string | undefined {
  const value = valueOf(env, name);
  if (value !== undefined && value.trim() === '') throw configError(`${name} is set but empty: give it a value or unset it`, name);
  return value;
}

/**
 * The service's settings from an environment. Throws one `CONFIG` error
 * naming the first setting that is missing or malformed.
 */
export function serviceSettingsFrom(env: Environment, effects: SettingsEffects = {}): ServiceSettings {
  const github = githubSettingsFrom(env, effects.readKeyFile ?? readKeyFileUtf8);
  const databaseUrl = databaseUrlFrom(nonEmpty(env, SETTING.databaseUrl), SETTING.databaseUrl, 'CONFIG');
  const markerSecret = markerSecretFrom(nonEmpty(env, SETTING.markerSecret));
  const dataDir = nonEmpty(env, SETTING.dataDir) ?? null;
  return { github, databaseUrl, markerSecret, dataDir };
}

function githubSettingsFrom(env: Environment, readKeyFile: (path: string) => string): GitHubAppSettings | null {
  if (GITHUB_VARIABLES.every((name) => valueOf(env, name) === undefined)) return null;
  const missing = (name: string): ProofgateError =>
    configError(
      `${name} is not set: a GitHub App needs ${SETTING.appId}, ${SETTING.privateKey} (or ${SETTING.privateKeyFile}) and ${SETTING.webhookSecret} together; unset every PROOFGATE_GITHUB_* variable to serve local repositories only`,
      name,
    );

  const appIdText = nonEmpty(env, SETTING.appId);
  if (appIdText === undefined) throw missing(SETTING.appId);
  const appId = appIdFrom(appIdText);

  const keyText = nonEmpty(env, SETTING.privateKey);
  const keyPath = nonEmpty(env, SETTING.privateKeyFile);
  if (keyText !== undefined && keyPath !== undefined) {
    throw configError(`${SETTING.privateKey} and ${SETTING.privateKeyFile} are both set: set one of them`, SETTING.privateKey);
  }
  if (keyText === undefined && keyPath === undefined) throw missing(SETTING.privateKey);
  const privateKey =
    keyText !== undefined ? privateKeyFrom(keyText, SETTING.privateKey) : privateKeyFrom(readKey(keyPath as string, readKeyFile), SETTING.privateKeyFile);
  const privateKeySource = keyText !== undefined ? ({ kind: 'env' } as const) : ({ kind: 'file', path: keyPath as string } as const);

  const webhookSecret = nonEmpty(env, SETTING.webhookSecret);
  if (webhookSecret === undefined) throw missing(SETTING.webhookSecret);

  const apiUrlText = nonEmpty(env, SETTING.apiUrl);
  const apiUrl = apiUrlText === undefined ? DEFAULT_GITHUB_API_URL : apiUrlFrom(apiUrlText);
  return { appId, privateKey, privateKeySource, webhookSecret, apiUrl };
}

function appIdFrom(text: string): number {
  const trimmed = text.trim();
  const id = /^[1-9][0-9]{0,15}$/.test(trimmed) ? Number(trimmed) : NaN;
  if (!Number.isSafeInteger(id)) {
    throw configError(`${SETTING.appId} must be a positive integer (the App ID shown on the GitHub App's settings page)`, SETTING.appId);
  }
  return id;
}

/** A GitHub App key is a few KiB: a bigger file is not one (and is not read whole). */
const MAX_KEY_FILE_BYTES = 64 * 1024;

/**
 * Read the key file: a regular file of at most 64 KiB. Opened non-blocking
 * and checked before reading, so a FIFO or a device (`/dev/zero`) named by
 * mistake is refused instead of hanging or reading without end.
 */
function readKeyFileUtf8(path: string): string {
  const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const stat = fstatSync(fd);
    if (stat.isDirectory()) throw Object.assign(new Error('a directory'), { code: 'EISDIR' });
    if (!stat.isFile()) throw Object.assign(new Error('not a regular file'), { code: 'ENOTREG' });
    if (stat.size > MAX_KEY_FILE_BYTES) throw Object.assign(new Error('too large'), { code: 'EFBIG' });
    return readFileSync(fd, 'utf8');
  } finally {
    closeSync(fd);
  }
}

/**
 * The key file's text. The message names the variable and the reason, never
 * the path: a key pasted into the `_FILE` variable by mistake would
 * otherwise be printed whole (the operator knows what they set).
 */
function readKey(path: string, readKeyFile: (path: string) => string): string {
  try {
    return readKeyFile(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException | null)?.code;
    const why =
      code === 'ENOENT'
        ? 'no such file'
        : code === 'EISDIR'
          ? 'it is a directory'
          : code === 'EACCES' || code === 'EPERM'
            ? 'permission denied'
            : code === 'ENOTREG'
              ? 'it is not a regular file'
              : code === 'EFBIG'
                ? `it is larger than ${MAX_KEY_FILE_BYTES / 1024} KiB`
                : code === 'ENAMETOOLONG'
                  ? 'the path is too long'
                  : `it cannot be read (${typeof code === 'string' ? code : 'unknown error'})`;
    throw configError(`${SETTING.privateKeyFile}: the file it names cannot be used: ${why}`, SETTING.privateKeyFile);
  }
}

/**
 * The PEM text of an RSA private key, checked with node:crypto. Text whose
 * line breaks were written as the two characters `\n` (a common way to put a
 * PEM into one line of an env file) is read with real line breaks. The
 * message never quotes the text, nor node:crypto's reason.
 */
function privateKeyFrom(text: string, name: string): string {
  const pem = !text.includes('\n') && text.includes('\\n') ? text.replace(/(?:\\r)?\\n/g, '\n') : text;
  if (!/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(pem)) {
    throw configError(`${name} is not a PEM private key (expected a "-----BEGIN RSA PRIVATE KEY-----" block, as GitHub's .pem file has)`, name);
  }
  let type: string | undefined;
  try {
    type = createPrivateKey({ key: pem, format: 'pem' }).asymmetricKeyType;
  } catch {
    throw configError(`${name} is not a private key node:crypto can read (damaged, truncated or encrypted PEM)`, name);
  }
  if (type !== 'rsa') throw configError(`${name} is not an RSA private key: GitHub App keys are RSA`, name);
  return pem;
}

/** An http(s) URL without credentials, query or fragment, and without a trailing slash. */
function apiUrlFrom(text: string): string {
  const url = httpUrl(text.trim());
  if (url === null) {
    throw configError(
      `${SETTING.apiUrl} must be an http(s) URL without credentials, query or fragment (GitHub Enterprise Server: https://HOST/api/v3)`,
      SETTING.apiUrl,
    );
  }
  return url.href.replace(/\/+$/, '');
}

/** The URL when `text` is an absolute http(s) URL with a host and no credentials, query or fragment; else null. */
export function httpUrl(text: string): URL | null {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return null;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return null;
  if (url.hostname === '' || url.username !== '' || url.password !== '' || url.search !== '' || url.hash !== '') return null;
  if (/\s/.test(text)) return null;
  return url;
}

function databaseUrlFrom(text: string | undefined, name: string, code: 'CONFIG' | 'USAGE'): string | null {
  if (text === undefined) return null;
  const trimmed = text.trim();
  let ok = /^postgres(?:ql)?:\/\//i.test(trimmed);
  if (ok) {
    try {
      new URL(trimmed);
    } catch {
      ok = false;
    }
  }
  if (!ok) throw new ProofgateError(code, `${name} must be a postgres:// or postgresql:// URL`, { setting: name });
  return trimmed;
}

function markerSecretFrom(text: string | undefined): Uint8Array | null {
  if (text === undefined) return null;
  const hex = text.trim();
  if (!/^(?:[0-9a-fA-F]{2})+$/.test(hex) || hex.length < MARKER_SECRET_MIN_BYTES * 2) {
    throw configError(
      `${SETTING.markerSecret} must be at least ${MARKER_SECRET_MIN_BYTES} bytes written as hex (${MARKER_SECRET_MIN_BYTES * 2} or more hex digits, e.g. from \`openssl rand -hex 32\`)`,
      SETTING.markerSecret,
    );
  }
  return new Uint8Array(Buffer.from(hex, 'hex'));
}

/** The flags of `proofgate serve`, as commander hands them over (strings; `http` false under --no-http). */
export interface ServeFlags {
  readonly port?: string;
  readonly host?: string;
  readonly data?: string;
  readonly databaseUrl?: string;
  readonly workers?: string;
  readonly http?: boolean;
  readonly repo?: string;
}

export const SERVE_DEFAULTS = { port: 8080, host: '127.0.0.1', workers: 1 } as const;
export const MAX_WORKERS = 64;

/** Where the service keeps its state. */
export type ServeStorage =
  | { readonly kind: 'postgres'; readonly url: string; readonly from: 'flag' | 'env' }
  /** The embedded store; `dataDir` null: the command's default directory. */
  | { readonly kind: 'sqlite'; readonly dataDir: string | null };

export interface ServeOptions {
  readonly port: number;
  readonly host: string;
  /** False under `--no-http`: workers only, nothing listens. */
  readonly http: boolean;
  readonly workers: number;
  readonly storage: ServeStorage;
  /** `--repo DIR`: a local repository whose changes the automerge router follows, or null. */
  readonly repo: string | null;
  readonly settings: ServiceSettings;
}

function usage(message: string, flag: string): ProofgateError {
  return new ProofgateError('USAGE', message, { flag });
}

function integerFlag(text: string | undefined, flag: string, min: number, max: number, fallback: number): number {
  if (text === undefined) return fallback;
  const value = /^[0-9]{1,6}$/.test(text.trim()) ? Number(text.trim()) : NaN;
  if (!Number.isInteger(value) || value < min || value > max) throw usage(`${flag} must be an integer from ${min} to ${max}`, flag);
  return value;
}

/** A host name (letters, digits, dots, hyphens) or an IP address. */
function hostFlag(text: string | undefined): string {
  if (text === undefined) return SERVE_DEFAULTS.host;
  const host = text.trim();
  const name = /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;
  if (isIP(host) === 0 && !name.test(host)) throw usage('--host must be a host name or an IP address', '--host');
  return host;
}

function pathFlag(text: string | undefined, flag: string): string | null {
  if (text === undefined) return null;
  if (text.trim() === '') throw usage(`${flag} must not be empty`, flag);
  return text;
}

/**
 * The options of `proofgate serve` from its flags and the environment (pure).
 * Flag errors are `USAGE` (exit 2) and come first; then the environment's
 * settings are read (`CONFIG`, exit 1). Storage: `--database-url` wins over
 * `PROOFGATE_DATABASE_URL`; `--data DIR` asks for the embedded store even
 * when `PROOFGATE_DATABASE_URL` is set (a flag wins over the environment);
 * without either flag `PROOFGATE_DATABASE_URL` selects PostgreSQL, else the
 * embedded store in `PROOFGATE_DATA_DIR` or the default directory. The
 * environment is checked in full either way: a malformed variable is an
 * error even when a flag overrides it.
 */
export function serveOptionsFrom(flags: ServeFlags, env: Environment, effects: SettingsEffects = {}): ServeOptions {
  // 0 asks the system for a free port (the service logs the one it got).
  const port = integerFlag(flags.port, '--port', 0, 65535, SERVE_DEFAULTS.port);
  const host = hostFlag(flags.host);
  const workers = integerFlag(flags.workers, '--workers', 1, MAX_WORKERS, SERVE_DEFAULTS.workers);
  const data = pathFlag(flags.data, '--data');
  const repo = pathFlag(flags.repo, '--repo');
  if (data !== null && flags.databaseUrl !== undefined) throw usage('--data and --database-url exclude each other: give one', '--data');
  const flagUrl = flags.databaseUrl === undefined ? null : databaseUrlFrom(flags.databaseUrl, '--database-url', 'USAGE');

  const settings = serviceSettingsFrom(env, effects);
  const storage: ServeStorage =
    flagUrl !== null
      ? { kind: 'postgres', url: flagUrl, from: 'flag' }
      : data !== null
        ? { kind: 'sqlite', dataDir: data }
        : settings.databaseUrl !== null
          ? { kind: 'postgres', url: settings.databaseUrl, from: 'env' }
          : { kind: 'sqlite', dataDir: settings.dataDir };
  return { port, host, http: flags.http !== false, workers, storage, repo, settings };
}
