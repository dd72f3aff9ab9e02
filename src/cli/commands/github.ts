import type { Command } from 'commander';
import { DEFAULT_APP_NAME, MAX_APP_NAME_LENGTH, WEBHOOK_PATH, githubAppManifest } from '../../service/index.js';
import { writeOut } from '../io.js';

const MANIFEST_HELP = `
The manifest lists the repository permissions and webhook events proofgate
needs and nothing more (docs/service.md gives the reason for each). It is
private to its owner ("public": false). With --url, the homepage and the
redirect after registration are URL and the webhook is URL${WEBHOOK_PATH};
GitHub's manifest flow needs --url. Register it by posting the JSON as the
"manifest" field of a form to https://github.com/settings/apps/new (or
https://github.com/organizations/ORG/settings/apps/new); docs/service.md
walks through it.
`;

/** `proofgate github`: the GitHub App proofgate runs as. */
export function registerGitHubCommands(program: Command): void {
  const github = program.command('github').description('the GitHub App proofgate runs as');

  github
    .command('manifest')
    .description("print the GitHub App manifest (permissions, events, webhook) for GitHub's manifest flow")
    .option('--url <url>', "the service's public http(s) URL: the App's homepage, and its webhook at URL/webhooks")
    .option('--name <name>', `the App's name, 1 to ${MAX_APP_NAME_LENGTH} characters, unique on GitHub`, DEFAULT_APP_NAME)
    .option('--json', 'print the manifest on one line')
    .addHelpText('after', MANIFEST_HELP)
    .action(async (flags: { url?: string; name?: string; json?: boolean }) => {
      const manifest = githubAppManifest({ url: flags.url, name: flags.name });
      // The manifest is JSON either way: indented for people, one line under --json.
      await writeOut(`${flags.json === true ? JSON.stringify(manifest) : JSON.stringify(manifest, null, 2)}\n`);
    });
}
