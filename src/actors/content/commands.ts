import { AppError } from '../../errors.js';
import type { SetAliasOp } from '../../content/aliases.js';
import type { Aspect, Aspects, Draft, Snapshot, VersionRecord } from '../../content/model.js';
import type { Principal } from '../../content/permissions.js';
import type { UpdateMode } from '../../content/update-modes.js';
import type { ActorContext, CommandBase, Reply } from '../runtime.js';
import type { Via } from './lifecycle-hooks.js';

/**
 * The commands of the content actor and what they answer. The content actor and the workspace
 * layer both read these, and neither imports the other for them (an import cycle would tie the
 * two into one module).
 */

/** The content operations of the spec (elements of `operations`). */
export type Operation =
  | SetAliasOp
  | { _type: 'svcAssignToViews'; views: string[] }
  | { _type: 'svcAssignToSymbolicViews'; views: string[]; targetView: string }
  | { _type: 'svcContentMetadata'; aspects: Aspects };

/**
 * Who writes: the caller, and for writes that may carry `svcFiles`, the file URIs the gateway
 * found the caller may read (`readableFileUris`; the actor process may have no file store, the
 * gateway has one). The actor refuses any other URI a write adds (`checkFileReferences`).
 */
export type Writer = CommandBase & {
  user: Principal;
  files?: string[];
  /** How the write came when not through its own endpoint: `bulk` for a line of a bulk import (audit, CONTRACT §15). */
  via?: 'bulk';
};

/** The commands on main content. */
export type MainCommand =
  | { k: 'create'; type: string; aspects: Aspects; ops: Operation[] }
  | { k: 'update'; ifMatch: string | null; unsafe: boolean; mode: UpdateMode; aspects: Record<string, Aspect | null>; ops: Operation[] }
  | { k: 'delete'; ifMatch: string }
  | { k: 'releaseAlias'; namespace: string; alias: string }
  | { k: 'assignView'; view: string; ifMatch: string | null; versionKey?: string; target?: string }
  | { k: 'removeFromView'; view: string }
  /** A new version with the aspects of an earlier one (CONTRACT §15 Restore); `version` is its version id, as the caller sent it. */
  | { k: 'restore'; ifMatch: string; version: string };

/** The commands on workspace drafts (src/actors/content/workspace.ts). */
export type WorkspaceCommand =
  | { k: 'wsCreate'; workspace: string; type: string; aspects: Aspects; ops: Operation[] }
  | { k: 'wsUpdate'; workspace: string; aspects: Record<string, Aspect | null>; ops: Operation[]; origin?: string; mode: 'update' | 'replace' }
  | { k: 'wsDelete'; workspace: string /** clear of the whole workspace: any logged-in user may */; clear?: boolean }
  | { k: 'wsPromote'; workspace: string }
  | { k: 'wsReleaseAlias'; workspace: string; namespace: string; alias: string };

export type ContentCommand = Writer & (MainCommand | WorkspaceCommand);

export type CommandKind = ContentCommand['k'];
export type CommandOf<K extends CommandKind> = Extract<ContentCommand, { k: K }>;

/** A failed operation of a partial success (status.subResults). */
export interface SubResult {
  operation: Operation;
  status: { message: string; statusCode: string; extraInfo: Record<string, unknown> };
}

/** What a create or update answers: enough for the gateway to render the envelope. */
export interface WriteResult {
  snapshot: Snapshot;
  version: VersionRecord;
  subResults: SubResult[];
}

/** What a draft write answers: the draft, and the alias operations that could not reserve. */
export interface DraftResult {
  draft: Draft;
  subResults: SubResult[];
}

/** `packed`: a stream command's committed reply, packed once to be sent as it is (its record is another: src/actors/content/replays.ts). */
export type Outcome = { reply: Reply; committed: boolean; packed?: Buffer } | 'lease-lost';

/** Did the command commit and answer success (so the steps that follow a commit run)? */
export const committed = (out: Outcome): boolean => out !== 'lease-lost' && out.reply.ok;

/** The input of a create in main: from the content API, or a promote of a draft. */
export type CreateInput = { type: string; aspects: Aspects; ops: Operation[] };
/** The input of an update in main: from the content API, or a promote of a draft. */
export type UpdateInput = { ifMatch: string | null; unsafe: boolean; mode: UpdateMode; aspects: Record<string, Aspect | null>; ops: Operation[] };

/**
 * One command kind: how it runs, and how a retry answers it when its commit took place but its
 * answer was lost (`head` is the content's head, written by this very command). Without
 * `resume` the command runs again: a draft write changes no head and is a plain overwrite.
 */
export interface CommandEntry<K extends CommandKind> {
  apply(cmd: CommandOf<K>, ctx: ActorContext): Promise<Outcome>;
  /** Finishes the idempotent steps that follow the commit and rebuilds the reply; null when it cannot. */
  resume?(cmd: CommandOf<K>, head: Snapshot): Promise<Reply | null>;
}

/** One entry per command kind: adding a kind means adding its entry (the type asks for every kind). */
export type CommandTable<K extends CommandKind = CommandKind> = { [P in K]: CommandEntry<P> };

/** The entry of a kind read off the wire; undefined for a kind nobody handles. */
export function entryOf(table: CommandTable, k: string): CommandEntry<CommandKind> | undefined {
  // Own keys only: `toString` or `constructor` is no command.
  return Object.hasOwn(table, k) ? (table[k as CommandKind] as CommandEntry<CommandKind>) : undefined;
}

/** 404 for a draft that is not there; it names no content key (the caller named the content by alias). */
export const noDraft = (workspace: string): AppError => new AppError('NOT_FOUND', `No draft of this content in workspace ${workspace}`);

/** A successful reply of a command. */
export const okReply = (cmd: CommandBase, value: unknown): Reply => ({ id: cmd.id, ok: true, value });

/** The main writes a promote needs; the content actor provides them (narrow on purpose). */
export interface MainWrites {
  createMain(cmd: Writer, ctx: ActorContext, input: CreateInput, via: Via, promotedFrom?: string): Promise<Outcome>;
  updateMain(cmd: Writer, ctx: ActorContext, input: UpdateInput, via: Via, promotedFrom?: string, restoredFrom?: string): Promise<Outcome>;
  /**
   * What `updateMain` answers before it looks at its input's aspects, for an update whose If-Match
   * is `ifMatch` and whose operations need AssignToView only when `views`: it throws when that
   * answer is a refusal (the content missing or deleted in main, 403, 409 for a stale `ifMatch`),
   * and returns when the update goes on, or when the refusal depends on the operations themselves
   * (`views` and no AssignToView). A promote asks it from the draft's summary before reading the draft.
   */
  refuseStaleUpdate(cmd: Writer, ifMatch: string | null, views: boolean): Promise<void>;
  /** The reply of a create or update whose commit took place but whose answer was lost, rebuilt from the head. */
  resumeWrite(cmd: CommandBase, head: Snapshot): Promise<Reply | null>;
}
