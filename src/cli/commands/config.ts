import type { Command } from 'commander';
import { protectedBranchNames } from '../../contracts/repo-config.js';
import { GitRepository, defaultLocalDataDir, readDataDirSettings, writeDataDirSettings } from '../../forge/local/index.js';
import { resolveDataDir } from '../data-dir.js';
import { emit, usageError } from '../io.js';
import { untrustedText } from '../untrusted-text.js';
import { addLocalForgeOptions, withLocalForge, type LocalForgeFlags } from './change.js';

/** `proofgate config`: settings of the data directory. */
export function registerConfigCommands(program: Command): void {
  const config = program.command('config').description('settings of the data directory');

  addLocalForgeOptions(
    config
      .command('trusted-branch')
      .description('show or set the trusted branch: its .proofgate.yml names the protected branches and the maintainers')
      .argument('[name]', 'the branch to trust from now on (must exist)')
      .option('--json', 'print {"trustedBranch","protectedBranches"} as JSON')
      .addHelpText(
        'after',
        "\nWithout a setting the trusted branch is `main`, else `master`, written down the first time the data directory is used. Changes may only target a protected branch (the trusted branch and its config's protectedBranches), and a protected branch is never a change's head.",
      ),
  ).action(async (name: string | undefined, flags: LocalForgeFlags) => {
    if (name !== undefined) {
      const repo = await GitRepository.open(flags.repo ?? process.cwd());
      if (!(await repo.isValidBranchName(name))) throw usageError(`not a valid branch name: ${name}`);
      await repo.requireBranch(name);
      const dataDir = resolveDataDir(flags.data, defaultLocalDataDir(repo));
      writeDataDirSettings(dataDir, { ...readDataDirSettings(dataDir), trustedBranch: name });
    }
    const shown = await withLocalForge(flags, async (forge) => {
      const trusted = await forge.trustedConfig();
      return { trustedBranch: trusted.branch, protectedBranches: protectedBranchNames(trusted.branch, trusted.config) };
    });
    await emit(
      Boolean(flags.json),
      shown,
      () =>
        `trusted branch      ${untrustedText(shown.trustedBranch)}\nprotected branches  ${shown.protectedBranches.map((name) => untrustedText(name)).join(', ')}`,
    );
  });
}
