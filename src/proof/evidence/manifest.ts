import { z } from 'zod';
import { errorMessage, parseJson, type Sha256Digest } from '../../core/index.js';
import { gitShaSchema, sha256DigestSchema } from '../../contracts/index.js';
import { PROOF_SCENARIO_ID } from '../../contracts/repo-config.js';
import { MANIFEST_NAME, NameKeys, entryNameProblem, nameKey } from './names.js';
import { evidenceError, quoteName } from './reasons.js';

/** Schema identifier inside every bundle's manifest.json. */
export const EVIDENCE_MANIFEST_SCHEMA = 'evidence-manifest.v1';

/** A scenario id, by the one rule the trusted config's `proof.scenarios[].id` follows. */
export const SCENARIO_ID_PATTERN = PROOF_SCENARIO_ID;

const observationSchema = z
  .object({
    path: z.string(),
    sha256: sha256DigestSchema,
    bytes: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
  })
  .strict();

export const evidenceManifestSchema = z
  .object({
    schema: z.literal(EVIDENCE_MANIFEST_SCHEMA),
    scenario: z.string().regex(SCENARIO_ID_PATTERN, { error: 'expected a scenario id' }),
    planDigest: sha256DigestSchema,
    headSha: gitShaSchema,
    observations: z.array(observationSchema),
  })
  .strict();

/** One observation file the manifest lists: its path in the bundle, the sha256 of its bytes, its size. */
export interface EvidenceObservation {
  readonly path: string;
  readonly sha256: Sha256Digest;
  readonly bytes: number;
}

/** `manifest.json` of an evidence bundle (`evidence-manifest.v1`). */
export interface EvidenceManifest {
  readonly schema: typeof EVIDENCE_MANIFEST_SCHEMA;
  readonly scenario: string;
  readonly planDigest: Sha256Digest;
  readonly headSha: string;
  readonly observations: readonly EvidenceObservation[];
}

/**
 * Check a manifest value: the schema, then every listed path (the entry-name
 * rules, not manifest.json itself, each once, also by case and Unicode form),
 * at most `maxObservations` of them. `MANIFEST_INVALID` otherwise.
 */
export function checkManifest(value: unknown, maxObservations: number): EvidenceManifest {
  const parsed = evidenceManifestSchema.safeParse(value);
  if (!parsed.success) {
    // The first issue only, its path and text cut short: an issue can list every unknown key of the manifest.
    const issues = parsed.error.issues;
    const issue = issues[0];
    const where = issue === undefined || issue.path.length === 0 ? '' : ` at ${cut(issue.path.map(String).join('.'))}`;
    const more = issues.length > 1 ? ` (and ${issues.length - 1} more ${issues.length === 2 ? 'issue' : 'issues'})` : '';
    throw evidenceError('MANIFEST_INVALID', `manifest.json does not match ${EVIDENCE_MANIFEST_SCHEMA}${where}: ${cut(issue?.message ?? 'invalid')}${more}`);
  }
  const manifest = parsed.data as EvidenceManifest;
  if (manifest.observations.length > maxObservations) {
    throw evidenceError('MANIFEST_INVALID', `manifest.json lists ${manifest.observations.length} observations, more than the ${maxObservations} allowed`);
  }
  const seen = new NameKeys();
  const manifestKey = nameKey(MANIFEST_NAME);
  for (const { path } of manifest.observations) {
    const problem = entryNameProblem(path);
    if (problem !== null) throw evidenceError('MANIFEST_INVALID', `manifest.json lists path ${quoteName(path)}, which ${problem}`);
    if (nameKey(path) === manifestKey) throw evidenceError('MANIFEST_INVALID', 'manifest.json lists itself as an observation');
    const conflict = seen.add(path);
    if (conflict?.how === 'same') {
      throw evidenceError('MANIFEST_INVALID', `manifest.json lists ${quoteName(path)} twice (names are compared ignoring case and Unicode form)`);
    }
    if (conflict !== null) {
      throw evidenceError('MANIFEST_INVALID', `manifest.json lists ${quoteName(path)} and ${quoteName(conflict.earlier)}, one as a file, one as a folder`);
    }
  }
  return manifest;
}

/** Longest piece of a schema issue (its path, its text) that a message shows. */
const MAX_ISSUE_CHARS = 200;

function cut(text: string): string {
  return text.length > MAX_ISSUE_CHARS ? `${text.slice(0, MAX_ISSUE_CHARS)}…` : text;
}

const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * Parse manifest.json's bytes: strict UTF-8 without a byte order mark (which
 * the JSON parser would skip, so two byte strings would read as one
 * manifest), JSON without repeated member names, then `checkManifest`.
 */
export function parseManifest(bytes: Uint8Array, maxObservations: number): EvidenceManifest {
  if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) throw evidenceError('MANIFEST_INVALID', 'manifest.json starts with a byte order mark');
  let text: string;
  try {
    text = STRICT_UTF8.decode(bytes);
  } catch {
    throw evidenceError('MANIFEST_INVALID', 'manifest.json is not valid UTF-8');
  }
  let value: unknown;
  try {
    value = parseJson(text, 'manifest.json');
  } catch (error) {
    throw evidenceError('MANIFEST_INVALID', errorMessage(error));
  }
  return checkManifest(value, maxObservations);
}
