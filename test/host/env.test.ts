import { describe, expect, it } from 'vitest';
import { PORTABLE_ENV, SESSION_ENV, TOOLCHAIN_ENV, allowListedEnv } from '../../src/host/index.js';

describe('allowListedEnv', () => {
  const parent = {
    PATH: '/usr/bin:/bin',
    HOME: '/home/dev',
    LANG: 'C.UTF-8',
    CI: 'true',
    GITHUB_TOKEN: 'ghp_x',
    AWS_SECRET_ACCESS_KEY: 'aws',
    OPENAI_API_KEY: 'sk-x',
    PROOFGATE_DATA_DIR: '/var/lib/proofgate',
    SSH_AUTH_SOCK: '/tmp/agent.sock',
  };

  it.each([
    ['portable names only', PORTABLE_ENV, {}, { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8' }],
    ['the toolchain list', TOOLCHAIN_ENV, {}, { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8', HOME: '/home/dev', CI: 'true' }],
    [
      'extras on top',
      PORTABLE_ENV,
      { LANG: 'en_US.UTF-8', PROOFGATE_CHECK_NAME: 'lint' },
      { PATH: '/usr/bin:/bin', LANG: 'en_US.UTF-8', PROOFGATE_CHECK_NAME: 'lint' },
    ],
    [
      'credential-looking names even when listed',
      ['PATH', 'GITHUB_TOKEN', 'AWS_SECRET_ACCESS_KEY', 'OPENAI_API_KEY', 'SSH_AUTH_SOCK'],
      {},
      { PATH: '/usr/bin:/bin' },
    ],
  ])('copies %s', (_name, names, extra, expected) => {
    expect(allowListedEnv(parent, names, extra)).toEqual(expected);
  });

  it('always sets PATH', () => {
    expect(allowListedEnv({ HOME: '/home/dev' }, ['HOME'])).toEqual({ HOME: '/home/dev', PATH: '/usr/local/bin:/usr/bin:/bin' });
  });

  it('the shipped lists hold no credential-looking name', () => {
    const lists = [...PORTABLE_ENV, ...SESSION_ENV, ...TOOLCHAIN_ENV];
    expect(lists.filter((name) => /TOKEN|SECRET|KEY|PASS|AUTH/.test(name))).toEqual([]);
  });
});
