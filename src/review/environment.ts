import { reservedPassThroughEnv } from '../contracts/index.js';
import { PORTABLE_ENV, allowListedEnv } from '../host/index.js';
import { LANE_TOOLS_ENV } from './tools/relay.js';

/** Variables a reviewer process inherits from proofgate's environment; nothing else passes. */
export const REVIEWER_ENV_ALLOW = PORTABLE_ENV;

/** The variables proofgate sets for every command reviewer. */
export interface ReviewerVariables {
  readonly home: string;
  readonly tmp: string;
  readonly requestFile: string;
  /** The read-only snapshot of the head under review (data, not the program). */
  readonly headDir: string;
  readonly evidenceDir: string;
  readonly evidencePath: string;
  readonly laneId: string;
  readonly family: string;
  readonly contextId: string;
  /** The lane's tools, when it is offered any (live proof): where and how it reaches them. */
  readonly tools?: ReviewerToolVariables;
}

/** Where a command lane finds its tools: all four are set together, or none. */
export interface ReviewerToolVariables {
  /** The MCP client config file (`mcpServers` shape) naming the relay. */
  readonly mcpConfig: string;
  /** The lane's Unix socket. */
  readonly socket: string;
  /** The lane's capability token. */
  readonly token: string;
  /** The file holding what the lane is asked to do with its tools. */
  readonly instructions: string;
}

/**
 * The whole environment of a reviewer process: the allow-list copied from the
 * parent, a scratch HOME and TMPDIR, the request-specific PROOFGATE_* values,
 * and the provider variables the lane names in `env` (copied as they are; a
 * reserved name, see `reservedPassThroughEnv`, never passes). Forge tokens, other
 * credentials and proofgate's own settings never pass. A lane offered tools
 * also gets PROOFGATE_MCP_CONFIG, PROOFGATE_TOOLS_SOCKET, PROOFGATE_TOOLS_TOKEN
 * (its own capability, nothing else's) and PROOFGATE_REVIEW_INSTRUCTIONS.
 */
export function reviewerEnvironment(parent: NodeJS.ProcessEnv, vars: ReviewerVariables, passThrough: readonly string[] = []): Record<string, string> {
  const provider: Record<string, string> = {};
  for (const name of passThrough) {
    const value = parent[name];
    if (value !== undefined && reservedPassThroughEnv(name) === undefined) provider[name] = value;
  }
  return allowListedEnv(parent, REVIEWER_ENV_ALLOW, {
    ...provider,
    HOME: vars.home,
    TMPDIR: vars.tmp,
    PROOFGATE_REVIEW_REQUEST: vars.requestFile,
    PROOFGATE_HEAD_DIR: vars.headDir,
    PROOFGATE_EVIDENCE_DIR: vars.evidenceDir,
    PROOFGATE_EVIDENCE_PATH: vars.evidencePath,
    PROOFGATE_LANE_ID: vars.laneId,
    PROOFGATE_REVIEW_FAMILY: vars.family,
    PROOFGATE_REVIEW_CONTEXT_ID: vars.contextId,
    ...(vars.tools === undefined
      ? {}
      : {
          [LANE_TOOLS_ENV.mcpConfig]: vars.tools.mcpConfig,
          [LANE_TOOLS_ENV.socket]: vars.tools.socket,
          [LANE_TOOLS_ENV.token]: vars.tools.token,
          [LANE_TOOLS_ENV.instructions]: vars.tools.instructions,
        }),
  });
}
