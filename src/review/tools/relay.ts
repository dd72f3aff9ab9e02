import { MCP_PROTOCOL } from './socket.js';

/**
 * How a stock MCP client inside a lane's jail reaches the lane's tools: a
 * stdio server command in the standard `mcpServers` shape whose process is a
 * plain pipe. It connects to the lane's socket, sends the handshake line
 * (the lane's token, protocol `mcp`) and then copies stdin to the socket and
 * the socket to stdout, ending when either side ends. It checks nothing and
 * holds nothing: the server outside the jail enforces everything.
 */

/** The environment variables a command lane with tools gets (and the relay reads). */
export const LANE_TOOLS_ENV = {
  /** A JSON file in the `mcpServers` shape naming the relay (read-only, proofgate's). */
  mcpConfig: 'PROOFGATE_MCP_CONFIG',
  /** The lane's Unix socket (MCP or the plain protocol, chosen by the handshake). */
  socket: 'PROOFGATE_TOOLS_SOCKET',
  /** The lane's capability token, for the handshake. */
  token: 'PROOFGATE_TOOLS_TOKEN',
  /** A plain-text file: what the lane is asked to do with its tools. */
  instructions: 'PROOFGATE_REVIEW_INSTRUCTIONS',
} as const;

/** The MCP server's name in the config (`mcpServers.proofgate`). */
export const MCP_SERVER_NAME = 'proofgate';

/** The relay, a few lines of CommonJS for `node -e`. */
export const RELAY_SOURCE = [
  "'use strict';",
  "const net = require('node:net');",
  `const socket = net.connect(process.env.${LANE_TOOLS_ENV.socket}, () => {`,
  `  socket.write(JSON.stringify({ token: process.env.${LANE_TOOLS_ENV.token}, protocol: '${MCP_PROTOCOL}' }) + '\\n');`,
  '  process.stdin.pipe(socket);',
  '  socket.pipe(process.stdout);',
  '});',
  "socket.on('error', (error) => { process.stderr.write('proofgate tools relay: ' + error.message + '\\n'); process.exit(1); });",
  "socket.on('close', () => process.exit(0));",
].join('\n');

/** Where the jail shows the host's system programs (read-only binds of /usr and the top-level system directories). */
const JAIL_SYSTEM_DIRS = ['/usr/', '/bin/', '/sbin/', '/lib/', '/lib32/', '/lib64/', '/libx32/'];

/**
 * The node the relay runs with: proofgate's own (`process.execPath`) when it
 * sits in a system directory the jail binds, else `node` from the lane's
 * PATH (a node installed elsewhere, under nvm or /opt, is not in the jail).
 */
export function relayNodeCommand(execPath: string = process.execPath): string {
  return JAIL_SYSTEM_DIRS.some((dir) => execPath.startsWith(dir)) && !execPath.includes('/../') ? execPath : 'node';
}

export interface McpServersConfig {
  readonly mcpServers: {
    readonly [MCP_SERVER_NAME]: {
      readonly command: string;
      readonly args: readonly string[];
      readonly env: Readonly<Record<string, string>>;
    };
  };
}

/** The MCP client config a lane is handed: one stdio server, the relay, with the lane's socket and token in its env. */
export function mcpConfig(socketPath: string, token: string, options: { readonly node?: string } = {}): McpServersConfig {
  return {
    mcpServers: {
      [MCP_SERVER_NAME]: {
        command: options.node ?? relayNodeCommand(),
        args: ['-e', RELAY_SOURCE],
        env: { [LANE_TOOLS_ENV.socket]: socketPath, [LANE_TOOLS_ENV.token]: token },
      },
    },
  };
}
