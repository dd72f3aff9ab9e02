import { ProofgateError } from '../core/index.js';
import type { ArtifactScope, ReadAllOptions, ReadOptions } from './ports.js';

/** Longest stream id, event id, type, run id, media type or purpose accepted. */
export const MAX_NAME_LENGTH = 1024;

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;
const PRINTABLE_ASCII = /^[\x20-\x7e]+$/;
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** A nonempty printable name (no control characters, no lone surrogates). */
export function checkName(value: unknown, what: string): string {
  if (typeof value !== 'string') throw new ProofgateError('INVALID_INPUT', `${what} must be a string`);
  if (value.length === 0) throw new ProofgateError('INVALID_INPUT', `${what} must not be empty`);
  if (value.length > MAX_NAME_LENGTH) throw new ProofgateError('INVALID_INPUT', `${what} is longer than ${MAX_NAME_LENGTH} characters`);
  if (PRINTABLE_ASCII.test(value)) return value;
  if (CONTROL.test(value)) throw new ProofgateError('INVALID_INPUT', `${what} must not contain control characters`);
  if (LONE_SURROGATE.test(value)) throw new ProofgateError('INVALID_INPUT', `${what} holds a lone surrogate`);
  return value;
}

export function checkCount(value: unknown, what: string, min: number): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) {
    throw new ProofgateError('INVALID_INPUT', `${what} must be an integer >= ${min}`);
  }
  return value;
}

function optionsObject(value: unknown, what: string): Record<string, unknown> {
  if (value === undefined) return {};
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new ProofgateError('INVALID_INPUT', `${what} must be an object`);
  }
  return value as Record<string, unknown>;
}

export interface NormalReadOptions {
  readonly fromRevision: number;
  readonly limit: number | undefined;
}

export function checkReadOptions(value: ReadOptions | undefined): NormalReadOptions {
  const options = optionsObject(value, 'read options');
  return {
    fromRevision: options.fromRevision === undefined ? 0 : checkCount(options.fromRevision, 'fromRevision', 0),
    limit: options.limit === undefined ? undefined : checkCount(options.limit, 'limit', 1),
  };
}

export interface NormalReadAllOptions {
  readonly afterPosition: number;
  readonly limit: number | undefined;
  readonly streamPrefix: string;
}

export function checkReadAllOptions(value: ReadAllOptions | undefined): NormalReadAllOptions {
  const options = optionsObject(value, 'readAll options');
  const prefix = options.streamPrefix;
  if (prefix !== undefined && typeof prefix !== 'string') throw new ProofgateError('INVALID_INPUT', 'streamPrefix must be a string');
  return {
    afterPosition: options.afterPosition === undefined ? 0 : checkCount(options.afterPosition, 'afterPosition', 0),
    limit: options.limit === undefined ? undefined : checkCount(options.limit, 'limit', 1),
    streamPrefix: prefix ?? '',
  };
}

export function checkPrefix(value: unknown): string {
  if (value === undefined) return '';
  if (typeof value !== 'string') throw new ProofgateError('INVALID_INPUT', 'stream prefix must be a string');
  return value;
}

/** The scope's namespace must be the storage's own. */
export function checkScope(scope: unknown, namespace: string): ArtifactScope {
  const value = optionsObject(scope, 'artifact scope');
  if (value.namespace !== namespace) {
    throw new ProofgateError('INVALID_INPUT', `artifact scope namespace must be this storage's namespace (${namespace})`);
  }
  return { namespace, runId: checkName(value.runId, 'artifact scope runId') };
}
