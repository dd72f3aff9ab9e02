import { generateKeyPairSync, type KeyPairKeyObjectResult } from 'node:crypto';

/**
 * RSA key pairs for GitHub App tests, made once per test process and shared
 * by every file it runs (vitest runs files without isolation): a 2048-bit
 * pair costs about 0.4 s of CPU to generate, and the App harnesses start
 * dozens of times a run. `testKeyPair(n)` for different `n` are different
 * pairs, for the tests that need a key GitHub does not know.
 */
const pairs = new Map<number, KeyPairKeyObjectResult>();

export function testKeyPair(n = 0): KeyPairKeyObjectResult {
  let pair = pairs.get(n);
  if (pair === undefined) {
    pair = generateKeyPairSync('rsa', { modulusLength: 2048 });
    pairs.set(n, pair);
  }
  return pair;
}
