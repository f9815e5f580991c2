/**
 * How many of something each key holds (a user's streams or exports, an address's WebSockets
 * waiting for their first message), for the per-key bounds of the gateway. A key at zero is
 * forgotten, so the map holds only keys that hold something.
 */
export class KeyedCounts {
  private readonly counts = new Map<string, number>();

  get(key: string): number {
    return this.counts.get(key) ?? 0;
  }

  add(key: string): void {
    this.counts.set(key, this.get(key) + 1);
  }

  remove(key: string): void {
    const left = this.get(key) - 1;
    if (left > 0) this.counts.set(key, left);
    else this.counts.delete(key);
  }
}
