/**
 * The port through which a review lane is offered tools (live proof is the
 * one implementation, in src/proof/). Review defines it and knows nothing of
 * scenarios, producers or bundles: a toolbox lists tools, answers calls and
 * keeps a receipt of every call for the review record. Everything a tool
 * answers is untrusted data for the reviewer, never instructions.
 */

/** A JSON Schema object describing a tool's arguments (what MCP and tool-calling APIs expect). */
export interface LaneToolSchema {
  readonly type: 'object';
  readonly properties: Readonly<Record<string, unknown>>;
  readonly required?: readonly string[];
  readonly additionalProperties?: boolean;
}

/** One tool a lane is offered. `name` matches /^[a-z0-9_]{1,64}$/ (fits every tool-calling API). */
export interface LaneTool {
  readonly name: string;
  readonly description: string;
  readonly inputSchema: LaneToolSchema;
}

/** A sign of life while a call runs: transports turn it into progress notifications. */
export interface LaneToolProgress {
  /** Milliseconds since the call started. */
  readonly elapsedMs: number;
  readonly message: string;
}

export interface LaneToolCall {
  readonly name: string;
  /** The arguments as the reviewer sent them (untrusted: the toolbox checks them). */
  readonly arguments: unknown;
  /** Aborted when the client cancels or its own wait times out: the call answers inconclusive at once. */
  readonly signal?: AbortSignal;
  readonly onProgress?: (progress: LaneToolProgress) => void;
}

/**
 * What a call came to. `status` is the proof outcome's (`verified`,
 * `inconclusive`, `rejected`); `text` is what a reviewer reads (observations
 * are delimited as untrusted data); `data` is the same as JSON.
 */
export interface LaneToolResult {
  readonly status: 'verified' | 'inconclusive' | 'rejected';
  readonly text: string;
  readonly data: unknown;
}

/**
 * A receipt the review record keeps for every distinct thing a tool ran: the
 * subject digest it ran on (a proof plan's digest), the artifact digest it
 * came back with (an evidence bundle's, or null), and how it ended. A
 * `rejected` receipt (evidence that failed verification) holds the review.
 */
export interface LaneToolReceipt {
  readonly tool: string;
  readonly lane_id: string;
  readonly subject_digest: string;
  readonly artifact_digest: string | null;
  readonly status: 'verified' | 'inconclusive' | 'rejected' | 'pending';
  readonly reason: string | null;
}

/** The tools one lane run is offered. */
export interface LaneToolbox {
  readonly tools: readonly LaneTool[];
  /** What the lane is asked to do with them (proof-focused review instructions), plain text. */
  readonly instructions: string;
  /** What was asked for and could not be offered, one line each (e.g. `web (UNAVAILABLE: ...)`); empty when nothing is missing. */
  readonly gaps?: readonly string[];
  call(call: LaneToolCall): Promise<LaneToolResult>;
}

/** Who a toolbox is for. */
export interface LaneToolLease {
  readonly laneId: string;
  readonly contextId: string;
  readonly attempt: number;
}

/**
 * One review's tools: a toolbox per lane run (or null: this lane gets none),
 * all of them spending one budget, and the receipts of everything run.
 */
export interface LaneToolPort {
  open(lease: LaneToolLease): LaneToolbox | null;
  receipts(): readonly LaneToolReceipt[];
  /** The review is over: nothing more may start, pending calls answer inconclusive. */
  close(): void;
}
