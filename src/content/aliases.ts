import { AppError } from '../errors.js';
import { MAIN_NAMESPACE } from './model.js';

/**
 * The alias rules, in one place. An alias is `namespace/alias`; the namespace holds no slash, the
 * alias may. Every content has its main alias `contentid/<key>` (`mainAlias` in model.ts), which
 * names the key directly and has no global key. Any other alias is a global key
 * `alias:<namespace>/<alias>` whose value is either the content key (assigned in main) or
 * `~<workspace>|<key>` (reserved by a workspace draft: it names its content on that workspace
 * only, and no other content may take it). src/actors/scripts/reserve-alias-1.lua writes the
 * same two forms.
 */

/** The svcSetAlias operation of the spec: claims an alias for the content. */
export interface SetAliasOp {
  _type: 'svcSetAlias';
  namespace: string;
  alias: string;
}

/**
 * The characters of a content's aliases besides its main one (`namespace/alias` each), at most.
 * Every change-feed event and webhook delivery of the content carries them all (CONTRACT §13),
 * and a view change fans out to each symbolic view that follows it: with no bound, a few
 * thousand long aliases made one commit hundreds of megabytes of events (the fourteenth
 * session's review). About a thousand aliases of common length.
 */
export const MAX_ALIAS_CHARS = 64 * 1024;

/**
 * 400 when a write would take the content's aliases past MAX_ALIAS_CHARS: `held` its aliases
 * now, `adding` those the write claims. A content past the bound already (stored before it) can
 * still be written, but takes no more.
 */
export function refuseTooManyAliasChars(held: readonly string[], adding: readonly string[]): void {
  if (!adding.length) return;
  let chars = 0;
  for (const a of held) chars += a.length;
  for (const a of adding) chars += a.length;
  if (chars > MAX_ALIAS_CHARS)
    throw new AppError('BAD_REQUEST', `The content's aliases would hold ${chars} characters; at most ${MAX_ALIAS_CHARS} are allowed`, {
      limit: MAX_ALIAS_CHARS,
      found: chars,
    });
}

/** The full name `namespace/alias`. */
export const aliasName = (namespace: string, alias: string): string => `${namespace}/${alias}`;

/** Splits a full name at its first slash: the namespace holds none, the alias may. */
export function splitAlias(name: string): [namespace: string, alias: string] {
  const i = name.indexOf('/');
  return [name.slice(0, i), name.slice(i + 1)];
}

/** Does the namespace hold the main aliases (`contentid/<key>`), which name their key directly? */
export const isMainNamespace = (namespace: string): boolean => namespace === MAIN_NAMESPACE;

/** Who holds an alias: a content in main, or a content's draft in a workspace. */
export interface AliasHolder {
  cid: string;
  workspace?: string;
}

/** The value of an alias's global key for its holder: the key, or `~<workspace>|<key>` for a reservation. */
export function aliasValue(cid: string, workspace?: string): string {
  return workspace ? `~${workspace}|${cid}` : cid;
}

/** The holder a global key's value names (the inverse of `aliasValue`). */
export function parseAliasValue(value: string): AliasHolder {
  if (value[0] !== '~') return { cid: value };
  const bar = value.indexOf('|');
  return { cid: value.slice(bar + 1), workspace: value.slice(1, bar) };
}

/**
 * The content an alias names for a reader in main (no workspace) or in a workspace, given its
 * global key's value (null: free). A reservation names its content on its own workspace only.
 */
export function aliasTarget(value: string | null, workspace?: string): string | null {
  if (value === null) return null;
  const holder = parseAliasValue(value);
  if (holder.workspace === undefined) return holder.cid;
  return workspace !== undefined && holder.workspace === workspace ? holder.cid : null;
}

/** The svcSetAlias operations of a write, in order, each with its full name. */
export function setAliasOps<O extends { _type: string }>(ops: readonly O[]): { op: O & SetAliasOp; name: string }[] {
  const out: { op: O & SetAliasOp; name: string }[] = [];
  for (const op of ops) if (isSetAlias(op)) out.push({ op, name: aliasName(op.namespace, op.alias) });
  return out;
}

const isSetAlias = <O extends { _type: string }>(op: O): op is O & SetAliasOp => op._type === 'svcSetAlias';

/**
 * The aliases a write frees: those held before and not after. A delete frees every alias
 * (after: none); an alias release frees one; a workspace update frees the reservations its new
 * operations no longer name; a failed write frees what it had newly reserved (before: what it
 * reserved, after: what was held before it).
 */
export function freedAliases(before: readonly string[], after: readonly string[]): string[] {
  return before.filter((a) => !after.includes(a));
}

/** The subResult of an svcSetAlias operation whose alias another content holds (spec: ALIAS_EXISTS, 40910). */
export function aliasExists<O>(
  operation: O,
  name: string,
): { operation: O; status: { message: string; statusCode: string; extraInfo: Record<string, unknown> } } {
  return { operation, status: { message: 'ALIAS_EXISTS', statusCode: '40910', extraInfo: { aliases: [name] } } };
}
