/**
 * The demo: a temporary git repository with six changes, each taken through
 * the whole automerge loop on the local forge (review on the exact head,
 * live proof where a maintainer asks for it, checks, repair, re-review,
 * merge), one after another, then a table.
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ProofgateError, errorMessage, newId } from '../../core/index.js';
import { openLocalAutomerge, type LoopOutcome, type LoopProgress } from '../../automerge/loop/index.js';
import { openLocalForge } from '../../forge/local/index.js';
import { jailStatus, type SandboxMode } from '../../host/index.js';
import { progressLine } from '../commands/automerge.js';
import { untrustedText } from '../untrusted-text.js';
import { createDemoRepository, DEMO_CHANGES, DEMO_CONTRIBUTOR, DEMO_MAINTAINER, type DemoChange } from './repository.js';

export interface DemoRow {
  readonly change: string;
  readonly title: string;
  readonly expected: DemoChange['expect'];
  readonly verdict: string | null;
  readonly repairs: number;
  readonly outcome: LoopOutcome['kind'];
  readonly reason: string;
  readonly mergeCommit: string | null;
}

export interface DemoResult {
  readonly repoDir: string;
  readonly dataDir: string;
  readonly rows: readonly DemoRow[];
  readonly seconds: number;
  /** Every change ended as the demo expects. */
  readonly ok: boolean;
  /** How the demo's checks ran: `jail`, or `none` because the jail does not work here. */
  readonly sandbox: SandboxMode;
  /** One line saying which way the demo ran (and why, when unjailed). */
  readonly sandboxLine: string;
}

/** Jailed when bubblewrap works here; otherwise unjailed, saying so (a demo must run anywhere). */
async function demoSandbox(): Promise<{ sandbox: SandboxMode; line: string }> {
  const status = await jailStatus();
  if (status.available) return { sandbox: 'jail', line: 'checks ran jailed (bubblewrap)' };
  return { sandbox: 'none', line: `checks ran UNJAILED (sandbox: none): ${status.reason}` };
}

export interface DemoOptions {
  /** Root of the demo's state; each run gets its own directory inside. */
  readonly dataRoot: string;
  /** Keep the temporary repository (it is removed otherwise). */
  readonly keep: boolean;
  readonly onProgress?: (line: string) => void;
}

/** Create the run's state directory under `dataRoot`; a path that cannot hold one is one typed IO error. */
async function makeDataDir(dataRoot: string): Promise<string> {
  const dataDir = join(dataRoot, 'demo', newId('run'));
  try {
    await mkdir(dataDir, { recursive: true });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why =
      code === 'EEXIST' || code === 'ENOTDIR'
        ? 'it (or a path inside it) is a file, not a directory'
        : code === 'EACCES' || code === 'EPERM'
          ? 'permission denied'
          : errorMessage(error);
    throw new ProofgateError('DATA_DIR', `cannot keep the demo's state in ${dataRoot}: ${why}`, { dataRoot });
  }
  return dataDir;
}

export async function runDemo(options: DemoOptions): Promise<DemoResult> {
  const started = Date.now();
  const say = (line: string): void => options.onProgress?.(line);
  const dataDir = await makeDataDir(options.dataRoot);
  const repoDir = await mkdtemp(join(tmpdir(), 'proofgate-demo-'));
  try {
    const { sandbox, line: sandboxLine } = await demoSandbox();
    say(sandboxLine);
    say(`creating the demo repository in ${repoDir}`);
    await createDemoRepository(repoDir, sandbox);
    const opened = await openLocalForge({ repoDir, dataDir });
    const automerge = await openLocalAutomerge({
      forge: opened.forge,
      dataDir,
      onProgress: (progress: LoopProgress) => say(`  ${progressLine(progress)}`),
    });
    const rows: DemoRow[] = [];
    try {
      const opens: { id: string; change: DemoChange }[] = [];
      for (const change of DEMO_CHANGES) {
        const snapshot = await opened.forge.openChange({ head: change.branch, base: 'main', title: change.title, author: DEMO_CONTRIBUTOR });
        say(`opened change ${snapshot.id}: ${change.title}`);
        opens.push({ id: snapshot.id, change });
      }
      for (const { id, change } of opens) {
        const text = change.comment ?? '/proofgate automerge';
        say(`change ${id}: ${DEMO_MAINTAINER} comments ${JSON.stringify(text)}`);
        const comment = await opened.forge.commentAs(id, text, DEMO_MAINTAINER);
        const routed = await automerge.router.handleComment(id, comment);
        const result = await (routed.dispatch ?? automerge.jobs.dispatch(id)).done;
        if (result.kind !== 'ran') throw new Error(`change ${id} is held by ${result.holder.owner}`);
        const outcome = result.outcome;
        say(`change ${id}: ${outcome.kind}${outcome.mergeCommit === null ? '' : ` as ${outcome.mergeCommit.slice(0, 12)}`}`);
        rows.push({
          change: id,
          title: change.title,
          expected: change.expect,
          verdict: outcome.verdict,
          repairs: outcome.repairs,
          outcome: outcome.kind,
          reason: outcome.reason,
          mergeCommit: outcome.mergeCommit,
        });
      }
    } finally {
      await automerge.close();
      await opened.close();
    }
    return { repoDir, dataDir, rows, seconds: (Date.now() - started) / 1000, ok: rows.every((row) => row.outcome === row.expected), sandbox, sandboxLine };
  } finally {
    if (!options.keep) await rm(repoDir, { recursive: true, force: true });
  }
}

function pad(text: string, width: number): string {
  return text.length >= width ? text : text + ' '.repeat(width - text.length);
}

/** The closing table: change, verdict, repairs, outcome, merged commit. */
export function renderDemoTable(rows: readonly DemoRow[]): string {
  const header = ['change', 'title', 'verdict', 'repairs', 'outcome', 'merged commit'];
  const body = rows.map((row) =>
    [row.change, row.title, row.verdict ?? '-', String(row.repairs), row.outcome, row.mergeCommit?.slice(0, 12) ?? '-'].map((cell) => untrustedText(cell)),
  );
  const widths = header.map((title, column) => Math.max(title.length, ...body.map((cells) => (cells[column] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((cell, column) => pad(cell, widths[column] ?? 0))
      .join('  ')
      .trimEnd();
  return [line(header), line(widths.map((width) => '-'.repeat(width))), ...body.map(line)].join('\n');
}
