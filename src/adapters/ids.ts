import { monotonicFactory } from 'ulid';
import { randomBytes } from 'node:crypto';

const ulid = monotonicFactory();

/** A new content key: a ULID, URL-safe, without `:` or `/` (CONTRACT §5). */
export const newContentKey = (): string => ulid();
/** A new version key, sortable by creation. */
export const newVersionKey = (): string => ulid();
/** A command id, recorded by the commit so that a replay is idempotent. */
export const newCommandId = (): string => randomBytes(12).toString('base64url');

/** FNV-1a (32 bit) of a content key, mod the partition count: the content's actor partition. */
export function partitionOf(contentKey: string, partitions: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < contentKey.length; i++) {
    h ^= contentKey.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % partitions;
}
