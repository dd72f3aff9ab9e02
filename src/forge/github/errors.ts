/**
 * Turns Octokit failures into ProofgateErrors with stable codes. Messages are
 * built from the status, the operation and GitHub's own message only (never
 * from request headers), then scrubbed again for credentials.
 */
import { ProofgateError, errorMessage, type ErrorCode } from '../../core/errors.js';
import { redactSecrets } from './redact.js';

export interface HttpFailure {
  readonly status: number;
  readonly githubMessage: string;
}

/** Status and GitHub's message of an Octokit RequestError; null for anything else. */
export function httpFailure(error: unknown): HttpFailure | null {
  if (typeof error !== 'object' || error === null) return null;
  const status = (error as { status?: unknown }).status;
  if (typeof status !== 'number') return null;
  const data = (error as { response?: { data?: unknown } }).response?.data;
  let githubMessage = '';
  if (typeof data === 'object' && data !== null && typeof (data as { message?: unknown }).message === 'string') {
    githubMessage = (data as { message: string }).message;
  } else if (typeof data === 'string') {
    githubMessage = data.slice(0, 200);
  }
  return { status, githubMessage: redactSecrets(githubMessage) };
}

function codeFor(status: number): ErrorCode {
  if (status === 401 || status === 403) return 'FORGE_AUTH';
  if (status === 404) return 'NOT_FOUND';
  return 'FORGE_API';
}

/** A ProofgateError for a failed GitHub call that no caller-specific rule handled. */
export function forgeError(operation: string, error: unknown): ProofgateError {
  if (error instanceof ProofgateError) return error;
  const failure = httpFailure(error);
  if (failure === null) {
    return new ProofgateError('FORGE_API', redactSecrets(`GitHub ${operation} failed: ${errorMessage(error)}`), { operation });
  }
  const suffix = failure.githubMessage === '' ? '' : `: ${failure.githubMessage}`;
  return new ProofgateError(codeFor(failure.status), `GitHub ${operation} failed with HTTP ${failure.status}${suffix}`, {
    operation,
    status: failure.status,
    githubMessage: failure.githubMessage,
  });
}
