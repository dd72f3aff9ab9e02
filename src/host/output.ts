/**
 * Capped capture of a child's output. `head` keeps the first bytes (what a
 * program says first); `tail` keeps the last ones (where a failure explains
 * itself), compacting now and then so a chatty program costs memory of about
 * twice the cap.
 */

export interface OutputCap {
  readonly maxBytes: number;
  /** Which end survives the cap (default `head`). */
  readonly keep?: 'head' | 'tail';
  /** `truncate` (default) drops what does not fit; `kill` kills the process group as soon as the cap is passed. */
  readonly onOverflow?: 'truncate' | 'kill';
}

export class OutputCapture {
  readonly #cap: OutputCap;
  readonly #overflow: () => void;
  #chunks: Buffer[] = [];
  #kept = 0;
  #truncated = false;

  constructor(cap: OutputCap, overflow: () => void) {
    this.#cap = cap;
    this.#overflow = overflow;
  }

  get truncated(): boolean {
    return this.#truncated;
  }

  add(chunk: Buffer): void {
    if (this.#cap.keep === 'tail') this.#addTail(chunk);
    else this.#addHead(chunk);
    if (this.#truncated && this.#cap.onOverflow === 'kill') this.#overflow();
  }

  bytes(): Buffer {
    const all = Buffer.concat(this.#chunks);
    const max = this.#cap.maxBytes;
    return this.#cap.keep === 'tail' && all.length > max ? all.subarray(all.length - max) : all;
  }

  #addHead(chunk: Buffer): void {
    const room = this.#cap.maxBytes - this.#kept;
    if (room <= 0) {
      if (chunk.length > 0) this.#truncated = true;
      return;
    }
    const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
    if (part.length < chunk.length) this.#truncated = true;
    this.#chunks.push(part);
    this.#kept += part.length;
  }

  #addTail(chunk: Buffer): void {
    this.#chunks.push(chunk);
    this.#kept += chunk.length;
    if (this.#kept > this.#cap.maxBytes) this.#truncated = true;
    if (this.#kept > 2 * this.#cap.maxBytes) {
      this.#chunks = [Buffer.from(this.bytes())];
      this.#kept = this.#chunks[0]?.length ?? 0;
    }
  }
}
