/**
 * Permission checks of CONTRACT §3, pure functions over the role table of config/security.json.
 *
 * A check passes when the principal holds, in `__global__` or in one of the content's contexts,
 * a role that grants the permission on the content's type or on `*`. A role's permission list
 * may contain `*`, which grants every permission, custom names included.
 */
import { AppError } from '../errors.js';

/** The context every principal's global roles live in; content without owners is only here. */
export const GLOBAL_CONTEXT = '__global__';
/** Wildcard: as a content type name, every type; as a permission name, every permission. */
export const WILDCARD = '*';
/** The role that may release aliases and trigger re-indexing (held in `__global__`). */
export const SYSADMIN_ROLE = 'sysadmin';

/** The role table: role name -> content type name (or `*`) -> permission names. */
export interface SecurityConfig {
  roles: Record<string, Record<string, string[]>>;
}

/** An authenticated caller: context name -> role names held there. */
export interface Principal {
  userId: string;
  contexts: Record<string, string[]>;
}

/** A principal's roles in every context, in one comparable string (whatever the order they came in). */
export const contextsKey = (p: Principal): string =>
  JSON.stringify(
    Object.keys(p.contexts)
      .sort()
      .map((c) => [c, [...p.contexts[c]].sort()]),
  );

/** The spec's "Authorization information response". */
export interface AuthorizationInfo {
  contexts: Record<string, string[]>;
  roles: Record<string, Record<string, string[]>>;
}

// Content type names and context names come from requests: look them up as own properties
// only, so names such as `constructor` or `__proto__` never reach Object.prototype.
const own = <V>(rec: Record<string, V>, key: string): V | undefined => (Object.hasOwn(rec, key) ? rec[key] : undefined);

const listGrants = (perms: string[] | undefined, permission: string): boolean =>
  perms !== undefined && (perms.includes(permission) || perms.includes(WILDCARD));

/** True when `role` grants `permission` on `contentType` (directly or through `*`). */
export function roleGrants(cfg: SecurityConfig, role: string, permission: string, contentType: string): boolean {
  const byType = own(cfg.roles, role);
  if (byType === undefined) return false;
  return listGrants(own(byType, contentType), permission) || listGrants(own(byType, WILDCARD), permission);
}

function contextGrants(cfg: SecurityConfig, principal: Principal, context: string, permission: string, contentType: string): boolean {
  const roles = own(principal.contexts, context);
  if (roles === undefined) return false;
  for (const role of roles) if (roleGrants(cfg, role, permission, contentType)) return true;
  return false;
}

/**
 * May the principal do `permission` on content of `contentType` whose contexts (the owners of
 * its svcSecurityContext aspect) are `contentContexts`? Pass `[]` for content without owners.
 *
 * @example isAllowed(cfg, sportseditor, 'Update', 'article', ['sports']) // true
 */
export function isAllowed(cfg: SecurityConfig, principal: Principal, permission: string, contentType: string, contentContexts: readonly string[]): boolean {
  if (contextGrants(cfg, principal, GLOBAL_CONTEXT, permission, contentType)) return true;
  for (const ctx of contentContexts) {
    if (ctx !== GLOBAL_CONTEXT && contextGrants(cfg, principal, ctx, permission, contentType)) return true;
  }
  return false;
}

/** Could the principal do `permission` on `contentType` in some context? (Workspace rules.) */
export function canInAnyContext(cfg: SecurityConfig, principal: Principal, permission: string, contentType: string): boolean {
  for (const ctx of Object.keys(principal.contexts)) {
    if (contextGrants(cfg, principal, ctx, permission, contentType)) return true;
  }
  return false;
}

/**
 * May the principal do `permission` on every content, whatever its type and owners: a role it
 * holds in `__global__` grants it on `*`. Then every `isAllowed` check of it passes (an export
 * reads versions with their snapshots for such a reader of everything).
 */
export function mayEverywhere(cfg: SecurityConfig, principal: Principal, permission: string): boolean {
  for (const role of own(principal.contexts, GLOBAL_CONTEXT) ?? []) {
    const byType = own(cfg.roles, role);
    if (byType !== undefined && listGrants(own(byType, WILDCARD), permission)) return true;
  }
  return false;
}

/**
 * Could the principal do `permission` on some type in some context? When it cannot, every check
 * of that permission refuses it (`isAllowed`, `canInAnyContext`), whatever the content: a write
 * that needs it is refused before its body is read (`refuseUnlessAnywhere`).
 */
export function mayAnywhere(cfg: SecurityConfig, principal: Principal, permission: string): boolean {
  for (const ctx of Object.keys(principal.contexts))
    for (const role of own(principal.contexts, ctx) ?? []) {
      const byType = own(cfg.roles, role);
      if (byType !== undefined && Object.keys(byType).some((type) => listGrants(own(byType, type), permission))) return true;
    }
  return false;
}

/**
 * 403 for a caller who holds none of `permissions` on any type in any context (`mayAnywhere`):
 * no write that needs one of them can pass, so its body need not be read. Named by the first.
 */
export function refuseUnlessAnywhere(cfg: SecurityConfig, principal: Principal, permissions: readonly string[]): AppError | undefined {
  return permissions.some((p) => mayAnywhere(cfg, principal, p)) ? undefined : permissionDenied(permissions[0], principal);
}

/**
 * The refusal (403) of a permission: it names the permission and the user, never the content's
 * type, nor anything else of a content the user may not see (CONTRACT §20 "Error bodies").
 *
 * @example throw permissionDenied('Update', user) // "Update denied for sportseditor"
 */
export function permissionDenied(permission: string, principal: Principal): AppError {
  return new AppError('PERMISSION_DENIED', `${permission} denied for ${principal.userId}`);
}

/** Holds the role `sysadmin` in `__global__` (alias release, re-indexing). */
export function isSysadmin(principal: Principal): boolean {
  return own(principal.contexts, GLOBAL_CONTEXT)?.includes(SYSADMIN_ROLE) ?? false;
}

/**
 * The spec's Authorization information response: the principal's contexts, and for each role
 * it holds (anywhere) that role's grants. A held role missing from the table maps to `{}`.
 */
export function authorizationInfo(cfg: SecurityConfig, principal: Principal): AuthorizationInfo {
  const contexts: Record<string, string[]> = {};
  const roles: Record<string, Record<string, string[]>> = {};
  for (const [ctx, held] of Object.entries(principal.contexts)) {
    if (ctx === '__proto__') continue; // would replace the prototype instead of adding a key
    contexts[ctx] = [...held];
    for (const role of held) {
      if (role === '__proto__' || own(roles, role) !== undefined) continue;
      const byType = own(cfg.roles, role) ?? {};
      const copy: Record<string, string[]> = {};
      for (const [type, perms] of Object.entries(byType)) if (type !== '__proto__') copy[type] = [...perms];
      roles[role] = copy;
    }
  }
  return { contexts, roles };
}
