/**
 * Free text in stored values is redacted with the one secret catalogue
 * (`core/secrets.ts`): these are its functions under the names the storage
 * policy uses. A match becomes `[redacted:<kind>]` (for assignments and
 * bearer or Authorization values the name before the value is kept);
 * redacting already redacted text changes nothing.
 */
export { firstSecretKind as findFreeTextSecret, redactSecrets as redactFreeText } from '../core/index.js';
