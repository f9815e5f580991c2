import { newCommandId, newContentKey } from '../adapters/ids.js';
import type { ContentCommand, WriteResult } from '../actors/content/content-actor.js';
import { isMainNamespace } from '../content/aliases.js';
import { IF_MATCH_FORM, type Aspect, type Draft, type Snapshot, type VersionRecord } from '../content/model.js';
import type { Principal } from '../content/permissions.js';
import type { UpdateMode } from '../content/update-modes.js';
import { AppError } from '../errors.js';
import { readableFileUris } from '../security/file-access.js';
import type { ContentServiceDeps } from './content-deps.js';
import { contentEnvelope, draftEnvelope, type Status } from './envelope.js';
import { IF_MATCH_SOURCE, checkAlias, checkIfMatchSyntax, parseEnvelope, requiredIfMatch } from './schemas.js';

/** A 409 of If-Match (the content changed since that ETag) says which ETag is current and where ETags come from. */
export function explainConflict(e: unknown): never {
  if (e instanceof AppError && e.code === 'CONTENT_MODIFIED' && typeof e.extraInfo.ETag === 'string') {
    throw new AppError('CONTENT_MODIFIED', `${e.message}: If-Match must name the current revision, ETag ${e.extraInfo.ETag} (${IF_MATCH_SOURCE})`, e.extraInfo);
  }
  throw e;
}

/**
 * The envelope a write of main answers (create, update, restore, promote: CONTRACT §5, §7, §15):
 * the version written, to a caller who may read the content as it now is. Another caller (a role
 * with Create or Update and no Read; a write that moved the content where its writer may update
 * but not read) gets the same status line and headers and the envelope's `system` part (the
 * content key and version id its ETag and history name anyway), with an empty aspects map and
 * `aspectsOmitted: true` in the status's extraInfo: not what the content holds, which its GET
 * answers 403. Before, an update of `{"aspects":{}}` or a restore answered such a caller every
 * aspect of the content.
 */
export function writtenEnvelope(mayRead: boolean, snapshot: Snapshot, version: VersionRecord, status: Status): Record<string, unknown> {
  return mayRead ? contentEnvelope(snapshot, version, status) : contentEnvelope(snapshot, { ...version, aspects: {} }, omitted(status));
}

/**
 * The envelope a draft write answers (workspace create and update), by the same rule with the
 * draft read rule (`Reads.mayReadDraft`): a draft made over main holds main's aspects. Its pending
 * operations are the ones the caller just sent.
 */
export function writtenDraftEnvelope(mayRead: boolean, draft: Draft, head: Snapshot | null, status: Status): Record<string, unknown> {
  return mayRead ? draftEnvelope(draft, head, status) : draftEnvelope(draft, head, omitted(status), {});
}

const omitted = (status: Status): Status => ({ ...status, extraInfo: { ...status.extraInfo, aspectsOmitted: true } });

/** Who writes and how the write came: `via: 'bulk'` for a line of a bulk import (audit, CONTRACT §15). */
export interface WriteContext {
  user: Principal;
  requestId: string;
  via?: 'bulk';
}

/** A content named by an alias, as in `/content/alias/<ns>/<alias>`. */
export interface AliasRef {
  ns: string;
  alias: string;
}

/**
 * Create, update and delete of main content, from a parsed request to the actor's answer: the
 * validation, the file-reference look-up and the command to the content's actor, which checks
 * permissions, locks and commits. The single requests (content-service.ts) and every line of a
 * bulk import (bulk-service.ts) come through here, so a line is answered exactly as its request.
 */
export class ContentWrites {
  constructor(private readonly d: ContentServiceDeps) {}

  /** Create (POST /content): the envelope as sent (JSON value). */
  async create(w: WriteContext, body: unknown): Promise<WriteResult> {
    const env = parseEnvelope(body);
    if (!env.contentType) throw new AppError('BAD_REQUEST', 'system.contentType is required on create');
    const aspects = Object.fromEntries(Object.entries(env.aspects).filter(([, a]) => a !== null)) as Record<string, NonNullable<(typeof env.aspects)[string]>>;
    const files = await this.readableFiles(w.user, aspects.svcFiles);
    const cmd: ContentCommand = {
      k: 'create',
      id: newCommandId(),
      cid: newContentKey(),
      requestId: w.requestId,
      user: w.user,
      files,
      type: env.contentType,
      aspects,
      ops: env.operations,
      ...(w.via ? { via: w.via } : {}),
    };
    const res = await this.d.mailbox.send<WriteResult>(cmd);
    this.d.heads.drop(cmd.cid);
    return res;
  }

  /**
   * The preconditions of an update that come before its body is read: If-Match (or unsafe) and
   * its syntax. 400 when neither is given.
   */
  checkUpdatePreconditions(ifMatch: string | null, unsafe: boolean): void {
    if (!unsafe && ifMatch === null) {
      throw new AppError('BAD_REQUEST', `An update requires If-Match (or unsafeUpdate=true): ${IF_MATCH_SOURCE}`, {
        header: 'If-Match',
        expected: IF_MATCH_FORM,
      });
    }
    if (ifMatch !== null) checkIfMatchSyntax(ifMatch);
  }

  /** Update (PUT /content/alias/<ns>/<alias>), after `checkUpdatePreconditions`. */
  async update(w: WriteContext, ref: AliasRef, opts: { ifMatch: string | null; unsafe: boolean; mode: UpdateMode }, body: unknown): Promise<WriteResult> {
    const env = parseEnvelope(body);
    const cid = await this.cidOf(ref);
    const files = await this.readableFiles(w.user, env.aspects.svcFiles);
    const cmd: ContentCommand = {
      k: 'update',
      id: newCommandId(),
      cid,
      requestId: w.requestId,
      user: w.user,
      files,
      ifMatch: opts.ifMatch,
      unsafe: opts.unsafe,
      mode: opts.mode,
      aspects: env.aspects,
      ops: env.operations,
      ...(w.via ? { via: w.via } : {}),
    };
    return this.d.mailbox
      .send<WriteResult>(cmd)
      .catch(explainConflict)
      .finally(() => this.d.heads.drop(cid));
  }

  /** Delete (DELETE /content/alias/<ns>/<alias>); If-Match is required. Answers the content key. */
  async delete(w: WriteContext, ref: AliasRef, ifMatchHeader: string | undefined): Promise<string> {
    const ifMatch = requiredIfMatch(ifMatchHeader, 'A delete');
    const cid = await this.cidOf(ref);
    await this.d.mailbox
      .send<unknown, ContentCommand>({
        k: 'delete',
        id: newCommandId(),
        cid,
        requestId: w.requestId,
        user: w.user,
        ifMatch,
        ...(w.via ? { via: w.via } : {}),
      })
      .catch(explainConflict)
      .finally(() => this.d.heads.drop(cid));
    return cid;
  }

  /**
   * The URIs of a write's `svcFiles` that the writer may read (CONTRACT §20 "File references"),
   * handed to the actor with the command. The rule is evaluated here because it needs the file
   * store (who uploaded a tmp file), which the gateway has and an actor process may not; it is
   * enforced by the actor (`checkFileReferences`), the one writer of main and of drafts, so that
   * every path writing svcFiles (create, update, draft create and update, promote) is covered,
   * and a draft that changes between this look and the write cannot slip a URI through.
   */
  readableFiles(user: Principal, aspect: Aspect | null | undefined): Promise<string[]> {
    return readableFileUris(this.d, user, aspect);
  }

  /**
   * The content key of an alias of the main namespace (`contentid/<key>`: the key itself), at
   * once; undefined for another namespace, which `cidOf` looks up. 400 for an alias that cannot be.
   */
  knownCid(p: AliasRef): string | undefined {
    checkAlias(p.ns, p.alias);
    return isMainNamespace(p.ns) ? p.alias : undefined;
  }

  /** The content key of an alias; 400 for a malformed one, 404 (40400) when no content has it. */
  async cidOf(p: AliasRef): Promise<string> {
    const known = this.knownCid(p);
    if (known !== undefined) return known;
    const cid = await this.d.store.resolveAlias(p.ns, p.alias);
    if (!cid) throw new AppError('NOT_FOUND', `Content ${p.ns}/${p.alias} not found`);
    return cid;
  }
}
