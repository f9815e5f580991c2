import type { Settings } from '../../config/settings.js';
import type { ContentStore } from '../adapters/content-store.js';
import type { FileStore } from '../adapters/file-store.js';
import type { Logger } from '../adapters/log.js';
import type { Mailbox } from '../actors/mailbox.js';
import type { ReindexSessions } from '../actors/reindex-session.js';
import type { Aspect } from '../content/model.js';
import type { Principal, SecurityConfig } from '../content/permissions.js';
import type { Variants } from '../content/variants.js';
import type { TokenService } from '../security/token-service.js';
import type { HeadCache } from './head-cache.js';
import type { Exchange } from './http.js';
import type { Reads } from './reads.js';
import type { Router } from './router.js';

/**
 * What the content service and the services that answer under its prefix (workspaces) are
 * built from. It lives apart from both so that neither imports the other: the workspace
 * endpoints register on the content service's router through `ContentEndpoints`.
 */
export interface ContentServiceDeps {
  settings: Settings;
  store: ContentStore;
  mailbox: Mailbox;
  tokens: TokenService;
  security: SecurityConfig;
  log: Logger;
  variants: Variants;
  /** Re-indexing sessions; null without a search engine. */
  reindex: ReindexSessions | null;
  /** The clock of time state (injected by tests). */
  clock: () => number;
  /** The public address of the gateway, e.g. http://127.0.0.1:8080. */
  baseUrl: () => string;
  /** Heads of contents for reads, dropped on every change. */
  heads: HeadCache;
  /** The file store: which files a write may map depends on who uploaded them. */
  files: FileStore;
}

/**
 * The part of the content service that the other endpoints of its prefix use: its router, and
 * the checks every request there shares (token, read permission, variant, file references of a write).
 */
/**
 * What a write needs of its caller whatever its body holds (`ContentService.authenticate`): one
 * of these permissions on some type in some context (`refuseUnlessAnywhere`), or `sysadmin` in
 * `__global__` with the refusal's message. A caller without it is answered 403 at the first token
 * check, before its body is read.
 */
export type Needs = { anyOf: readonly string[] } | { sysadmin: string };

export interface ContentEndpoints {
  readonly router: Router;
  /** Every permission and visibility decision of a read. */
  readonly reads: Reads;
  /**
   * 401 unless X-Auth-Token names a valid token: checked when the headers arrive and again once
   * the whole request has; the principal is the second check's (request-auth.ts). With `needs`,
   * 403 for a caller without it, at the first check before the body is read.
   */
  authenticate(x: Exchange, needs?: Needs): Promise<Principal>;
  /** The `variant` of a read: null when none; 404 when the content type does not have it. */
  variantOf(x: Exchange, type: string): string | null;
  /** The URIs of a write's `svcFiles` that the writer may read (CONTRACT §20 "File references"). */
  readableFiles(user: Principal, aspect: Aspect | null | undefined): Promise<string[]>;
}
