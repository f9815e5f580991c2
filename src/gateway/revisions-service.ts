import { LRUCache } from 'lru-cache';
import { AuditLog } from '../adapters/audit-log.js';
import { AuditSegments } from '../adapters/audit-segments.js';
import { newCommandId } from '../adapters/ids.js';
import type { ContentCommand, WriteResult } from '../actors/content/content-actor.js';
import { encodeAuditCursor, parseAuditQuery } from '../content/audit.js';
import { contextsOf, etagOf, ifMatchHolds, parseVersionId, type Snapshot, type VersionRecord } from '../content/model.js';
import { unpack } from '../adapters/codec.js';
import { isAllowed, isSysadmin } from '../content/permissions.js';
import { compareKeys } from '../content/revisions.js';
import { AppError } from '../errors.js';
import type { ContentEndpoints, ContentServiceDeps } from './content-deps.js';
import { writtenEnvelope } from './content-writes.js';
import {
  COMPARE_ON_LOOP_BYTES,
  COMPARE_ON_LOOP_PATH_CHARS,
  COMPARE_ON_LOOP_VALUES,
  CompareRenderer,
  type ComparedSide,
  decodedBytes,
  storedShape,
} from './compare-render.js';
import { STATUS_OK, VARY_ACCEPT, formatOf, serialize } from './envelope.js';
import type { Exchange } from './http.js';
import type { Params } from './router.js';
import { callerKey } from './keyed-counts.js';
import { checkAlias, requiredIfMatch } from './schemas.js';

/** Compares of large versions waiting for the compare thread, per process, at most (503 past it). */
const COMPARES_ON_THREAD = 8;
/** Of those, one caller's at most (429 past it): one account could hold them all (review s23d). */
const COMPARES_ON_THREAD_PER_CALLER = 2;

/**
 * Revisions over HTTP (CONTRACT §15): compare two versions of a content, restore one, and the
 * audit trail of main writes. The rules are in src/content/revisions.ts and src/content/audit.ts;
 * the restore is a command of the content's actor; the trail is read by src/adapters/audit-log.ts.
 */
export class RevisionsService {
  private readonly audit: AuditLog;

  /**
   * Decoded versions of compared contents, by content and version key, with their stored bytes and
   * values, bounded by what they hold decoded (`decodedBytes`: their stored bytes and 64 bytes a
   * value). Versions never change, and an editor compares many pairs of the same few versions.
   * Reading and decoding two 100 KB versions per compare made most of its garbage, and the
   * old-generation collections it caused were the slowest compares (issue 19). The answer never
   * mutates them: the diff copies what it puts in the patch. Answers themselves are not kept: a
   * diff of kept versions costs under a millisecond, and kept 100 KB answers filled the old
   * generation again (p999 22-32 ms with them, 11-16 ms without). Bounded by stored bytes alone
   * (8 MiB), versions of empty objects (64 bytes of heap for each byte stored) made it hold about
   * 500 MB (review 21, F1); 16 MiB counted so still holds 25 versions of 100 KB of article text.
   */
  private readonly versions = new LRUCache<string, { record: VersionRecord; bytes: number; values: number; pathChars: number }>({ maxSize: 16 * 1024 * 1024 });
  /** Compares of large versions, on a thread of their own. */
  private readonly renderer = new CompareRenderer(COMPARES_ON_THREAD, COMPARES_ON_THREAD_PER_CALLER);

  constructor(
    private readonly d: ContentServiceDeps,
    private readonly content: ContentEndpoints,
  ) {
    this.audit = new AuditLog(d.store.redis, d.settings.PARTITIONS, new AuditSegments(d.files));
    const r = content.router;
    r.on('GET', 'content/alias/:ns/:alias/compare', (x, p) => this.compare(x, p));
    r.on('POST', 'content/alias/:ns/:alias/restore', (x, p) => this.restore(x, p));
    r.on('GET', 'audit', (x) => this.auditQuery(x));
  }

  /**
   * Compare: the RFC 6902 patch from the aspects of `from` to those of `to` (default the current
   * version). A caller without Read gets the answer of a content that does not exist: nothing
   * about its versions, not even that it has them.
   */
  private async compare(x: Exchange, p: Params): Promise<void> {
    const user = await this.content.authenticate(x);
    const { cid, head } = await this.existing(p);
    this.content.reads.checkReadOrMissing(user, head, () => missing(p));
    const keys = compareKeys(head, x.query.get('from'), x.query.get('to'));
    // Large versions take a slot of the compare thread before they are read: a compare refused
    // there (503) has made Redis send nothing (sizes asked first; an archived version's is known
    // once read, and its slot taken then).
    const slots: (() => void)[] = [];
    const caller = callerKey(user, x, this.d.settings);
    try {
      if (!this.versions.has(`${cid}/${keys.from}`) || !this.versions.has(`${cid}/${keys.to}`)) {
        const sizes = await this.d.store.storedSizes([
          { cid, versionKey: keys.from },
          { cid, versionKey: keys.to },
        ]);
        if (sizes[0].version + sizes[1].version > COMPARE_ON_LOOP_BYTES) slots.push(this.renderer.slot(caller));
      }
      const [from, to] = await Promise.all([this.comparedVersion(cid, keys.from), this.comparedVersion(cid, keys.to)]);
      if (!from) throw new AppError('NOT_FOUND', `Version ${x.query.get('from')} not found`);
      if (!to) throw new AppError('NOT_FOUND', `Version ${x.query.get('to')} not found`);
      const bytes = from.bytes + to.bytes;
      const values = from.values + to.values;
      const paths = from.pathChars + to.pathChars;
      if (!slots.length && CompareRenderer.onThread(from.side, to.side, bytes, values, paths)) slots.push(this.renderer.slot(caller));
      x.send(200, [['Content-Type', 'application/json']], await this.renderer.answer(cid, from.side, to.side, bytes, values, paths));
    } finally {
      for (const release of slots) release();
    }
  }

  /**
   * A version to compare, its stored size and how many values it holds; null when the content
   * never had it. One of at most half COMPARE_ON_LOOP_BYTES and half COMPARE_ON_LOOP_VALUES is
   * decoded once and kept (see `versions`); a larger one is handed to the compare thread as stored,
   * never decoded here. Its values are counted on its stored bytes (`storedValues`).
   */
  private async comparedVersion(cid: string, key: string): Promise<{ side: ComparedSide; bytes: number; values: number; pathChars: number } | null> {
    const k = `${cid}/${key}`;
    const hit = this.versions.get(k);
    if (hit) return { side: { key, record: hit.record }, bytes: hit.bytes, values: hit.values, pathChars: hit.pathChars };
    const stored = await this.d.store.storedVersion(cid, key);
    if (!stored) return null;
    const { values, pathChars } = storedShape(stored, COMPARE_ON_LOOP_VALUES, COMPARE_ON_LOOP_PATH_CHARS);
    if (stored.length > COMPARE_ON_LOOP_BYTES / 2 || values > COMPARE_ON_LOOP_VALUES / 2 || pathChars > COMPARE_ON_LOOP_PATH_CHARS / 2)
      return { side: { key, stored }, bytes: stored.length, values, pathChars };
    const record = unpack<VersionRecord>(stored);
    this.versions.set(k, { record, bytes: stored.length, values, pathChars }, { size: Math.max(1, decodedBytes(stored.length, values)) });
    return { side: { key, record }, bytes: stored.length, values, pathChars };
  }

  /** Restore: a new version with the aspects of `version`, through the content's actor with If-Match. */
  private async restore(x: Exchange, p: Params): Promise<void> {
    const user = await this.content.authenticate(x, { anyOf: ['Update'] });
    const ifMatch = requiredIfMatch(x.header('if-match'), 'A restore');
    const fmt = formatOf(x.param('format'), x.header('accept')); // refused before anything is written
    const version = x.query.get('version');
    if (version === null || version === '') throw new AppError('BAD_REQUEST', 'version is required: a version id');
    // The actor answers for a deleted content and for Update permission, as on an update.
    checkAlias(p.ns, p.alias);
    const cid = await this.d.store.resolveAlias(p.ns, p.alias);
    if (cid === null) throw missing(p);
    // The file URIs the restored version maps that the caller may read; the actor refuses any other
    // it adds. The actor decides on the version id itself, after the permission check; the version
    // is looked at here only for a caller who may update the content, so the time of a 403 tells
    // nothing of whether the version exists or how many files it maps.
    const v = parseVersionId(version);
    let head = await this.d.heads.get(cid);
    const mayUpdate = head !== null && !head.deleted && isAllowed(this.d.security, user, 'Update', head.type, contextsOf(head.meta));
    // Nor for a stale If-Match, which the actor answers 409 from the head: such a restore writes
    // nothing and must not cost a read and decode of the version (review s23d). A cached head may
    // lag the actor's: one the If-Match does not name is read again.
    if (mayUpdate && head && !ifMatchHolds(ifMatch, cid, head.rev)) head = await this.d.store.head(cid);
    const current = head !== null && ifMatchHolds(ifMatch, cid, head.rev);
    const restored = mayUpdate && current && v?.cid === cid ? await this.d.store.version(cid, v.key) : null;
    const files = await this.content.readableFiles(user, restored?.aspects.svcFiles);
    const cmd: ContentCommand = { k: 'restore', id: newCommandId(), cid, requestId: x.requestId, user, files, ifMatch, version };
    const res = await this.d.mailbox.send<WriteResult>(cmd).finally(() => this.d.heads.drop(cid));
    x.send(
      200,
      [['Content-Type', 'application/json'], ['ETag', etagOf(cid, res.snapshot.rev)], VARY_ACCEPT],
      // The restored version's aspects only to a caller who may read the content (writtenEnvelope).
      serialize(writtenEnvelope(this.content.reads.mayRead(user, res.snapshot), res.snapshot, res.version, STATUS_OK), fmt),
    );
  }

  /** The audit trail, newest first; sysadmin only. */
  private async auditQuery(x: Exchange): Promise<void> {
    const user = await this.content.authenticate(x);
    if (!isSysadmin(user)) throw new AppError('PERMISSION_DENIED', 'Reading the audit trail requires sysadmin in __global__');
    const { content, ...q } = parseAuditQuery((n) => x.query.get(n), this.d.settings.PARTITIONS);
    let cid: string | undefined;
    if (content !== undefined) {
      const i = content.indexOf('/');
      const found = await this.d.store.resolveAlias(content.slice(0, i), content.slice(i + 1));
      // An alias that names nothing now (released, or never set) has no entries to find by it.
      if (found === null) return x.sendJson(200, { entries: [], next: null });
      cid = found;
    }
    const res = await this.audit.query({ ...q, cid });
    x.sendJson(200, { entries: res.entries, next: res.next && encodeAuditCursor(res.next) });
  }

  /** The content an alias names and its head; 404 when there is none (or it was deleted). */
  private async existing(p: Params): Promise<{ cid: string; head: Snapshot }> {
    checkAlias(p.ns, p.alias);
    const cid = await this.d.store.resolveAlias(p.ns, p.alias);
    const head = cid === null ? null : await this.d.heads.get(cid, 0);
    if (cid === null || !head || head.deleted) throw missing(p);
    return { cid, head };
  }
}

const missing = (p: Params) => new AppError('NOT_FOUND', `Content ${p.ns}/${p.alias} not found`);
