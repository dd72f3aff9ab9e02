import { describe, expect, it } from 'vitest';
import { runCli } from './helpers.js';

describe('proofgate --help', () => {
  it('states the trust model: what is trusted, what runs jailed, what the single-user CLI assumes', () => {
    const help = runCli(['--help']);
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/^Trust:$/m);
    expect(help.stdout).toContain('protectedBranches');
    expect(help.stdout).toMatch(/run jailed \(bubblewrap/);
    expect(help.stdout).toContain('sandbox: none');
    expect(help.stdout).toMatch(/single-user/);
  });
});
