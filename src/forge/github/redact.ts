/**
 * Text that may end up in an error message or a log line from the GitHub
 * adapter (API errors, request URLs, git push output) is scrubbed with the one
 * secret catalogue (`core/secrets.ts`): tokens, keys, Authorization and bearer
 * values, JWTs, private keys and `token=`-style query parameters.
 */
export { redactSecrets } from '../../core/index.js';
