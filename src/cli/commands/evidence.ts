import type { Command } from 'commander';
import { isProofgateError, isSha256Digest } from '../../core/index.js';
import {
  SCENARIO_ID_PATTERN,
  evidenceReason,
  packEvidenceBundle,
  verifyEvidenceBundle,
  type EvidenceManifest,
  type VerifiedBundle,
} from '../../proof/index.js';
import { emit, reportError, setExitStatus, usageError, writeOut } from '../io.js';
import { jsonForTerminal, untrustedText } from '../untrusted-text.js';

interface SubjectFlags {
  scenario?: string;
  planDigest?: string;
  head?: string;
}

/** Flags naming a bundle's subject: malformed ones are usage errors (exit 2). */
function checkSubjectFlags(flags: SubjectFlags): void {
  if (flags.scenario !== undefined && !SCENARIO_ID_PATTERN.test(flags.scenario)) {
    throw usageError('--scenario must be a scenario id (a letter or digit, then letters, digits, . _ -)');
  }
  if (flags.planDigest !== undefined && !isSha256Digest(flags.planDigest)) throw usageError('--plan-digest must be sha256:<64 lowercase hex>');
  if (flags.head !== undefined && !/^[0-9a-f]{40}$/.test(flags.head)) throw usageError('--head must be a full 40-character lowercase sha');
}

function renderManifest(manifest: EvidenceManifest): string[] {
  const lines = [
    `  scenario  ${untrustedText(manifest.scenario)}`,
    `  plan      ${manifest.planDigest}`,
    `  head      ${manifest.headSha}`,
    `  ${manifest.observations.length} observation${manifest.observations.length === 1 ? '' : 's'}${manifest.observations.length === 0 ? '' : ':'}`,
  ];
  for (const observation of manifest.observations) {
    lines.push(`    ${observation.sha256}  ${String(observation.bytes).padStart(10)} bytes  ${untrustedText(observation.path)}`);
  }
  return lines;
}

function renderVerified(file: string, bundle: VerifiedBundle): string {
  return [`verified ${untrustedText(file)}: ${bundle.digest} (${bundle.archiveBytes} bytes)`, ...renderManifest(bundle.manifest)].join('\n');
}

export function registerEvidenceCommands(program: Command): void {
  const evidence = program
    .command('evidence')
    .description('evidence bundles of behavioural proof: pack a directory of observations, verify a bundle before anything in it is trusted');

  evidence
    .command('pack')
    .description(
      'pack the regular files under DIR into an evidence bundle: manifest.json (scenario, plan digest, head, each file with its sha256 and size) and the files, the same bytes for the same inputs; a symbolic link or special file under DIR is refused, never followed',
    )
    .argument('<dir>', 'directory of observation files')
    .requiredOption('--scenario <id>', 'the scenario the observations belong to')
    .requiredOption('--plan-digest <digest>', 'sha256:<hex> of the plan the scenario ran')
    .requiredOption('--head <sha>', 'the full sha of the head the scenario ran on')
    .requiredOption('-o, --out <file>', 'the bundle to write (outside DIR; replaced if it exists)')
    .option('--json', 'print {"out","digest","archiveBytes","manifest"} as JSON')
    .action(async (dir: string, flags: SubjectFlags & { out: string; json?: boolean }) => {
      checkSubjectFlags(flags);
      const packed = await packEvidenceBundle({
        dir,
        out: flags.out,
        scenario: flags.scenario as string,
        planDigest: flags.planDigest as string,
        headSha: flags.head as string,
      });
      await emit(Boolean(flags.json), packed, () =>
        [`packed ${untrustedText(packed.out)}: ${packed.digest} (${packed.archiveBytes} bytes)`, ...renderManifest(packed.manifest)].join('\n'),
      );
    });

  evidence
    .command('verify')
    .description(
      'verify an evidence bundle before anything in it is extracted or trusted (paths, duplicates, links, methods, CRC-32, sizes, expansion and entry caps, header agreement, overlaps, the manifest and every digest); exit 0, or 1 with the reason (UNSAFE_PATH, CRC_MISMATCH, ...) on one line',
    )
    .argument('<bundle>', 'the bundle (a ZIP file)')
    .option('--scenario <id>', 'require the manifest to name this scenario')
    .option('--plan-digest <digest>', 'require the manifest to name this plan digest')
    .option('--head <sha>', 'require the manifest to name this head')
    .option('--json', 'print {"valid":true,"digest","archiveBytes","manifest"}, or {"valid":false,"error":{"code","reason","message"}}, as JSON')
    .action(async (file: string, flags: SubjectFlags & { json?: boolean }) => {
      checkSubjectFlags(flags);
      let bundle: VerifiedBundle;
      try {
        bundle = await verifyEvidenceBundle(file, { scenario: flags.scenario, planDigest: flags.planDigest, headSha: flags.head });
      } catch (error) {
        if (!isProofgateError(error, 'EVIDENCE_INVALID')) throw error;
        // The usual error line on stderr; under --json the document also carries the reason.
        setExitStatus(await reportError(error));
        if (flags.json === true) {
          await writeOut(`${jsonForTerminal({ valid: false, error: { code: error.code, reason: evidenceReason(error), message: error.message } })}\n`);
        }
        return;
      }
      const { digest, archiveBytes, manifest } = bundle;
      await emit(Boolean(flags.json), { valid: true, digest, archiveBytes, manifest }, () => renderVerified(file, bundle));
    });
}
