import type { Settings } from '../../config/settings.js';
import type { Draft, Snapshot } from '../content/model.js';
import { canInAnyContext, mayEverywhere, permissionDenied, type Principal, type SecurityConfig } from '../content/permissions.js';
import { mayRead, mayReadVersion, onViewFilter, publicUntil, publicVersionKeys, visibilityFilter, type VisibilityRules } from '../content/visibility.js';
import { AppError } from '../errors.js';

export interface ReadsDeps {
  security: SecurityConfig;
  settings: Pick<Settings, 'PUBLIC_VIEWS'>;
  /** The clock of time state (injected by tests). */
  clock: () => number;
}

/**
 * Every permission and visibility decision of a read in the gateway: content, metadata and
 * history reads, workspace drafts, file delivery, search and taxonomy all ask here, and only
 * here are the rules of `src/content/permissions.ts` and `src/content/visibility.ts` applied to
 * a caller and a content (the export's renderer, on a thread of its own, is given the rule's
 * data by `readRuleOf` and applies the same `mayRead`). A read path that decided on its own could drift from the others;
 * the platform's promise is that one decision holds on every path (CONTRACT §9, §12, §20).
 */
export class Reads {
  private readonly rules: VisibilityRules;

  constructor(private readonly d: ReadsDeps) {
    this.rules = { security: d.security, publicViews: d.settings.PUBLIC_VIEWS.split(',') };
  }

  /** Read permission on the content, by its type and the contexts of its owners. */
  mayRead(user: Principal, head: Snapshot): boolean {
    return mayRead(this.d.security, user, head);
  }

  /**
   * What `mayRead` decides on for this caller, as data: for the export's renderer, which applies
   * the same rule on a thread of its own (`exported` in export-render.ts).
   */
  readRuleOf(user: Principal): { security: SecurityConfig; user: Principal } {
    return { security: this.d.security, user };
  }

  /** May the caller read every content, whatever its type and owners (`mayEverywhere`)? */
  readsEverything(user: Principal): boolean {
    return mayEverywhere(this.d.security, user, 'Read');
  }

  /** 403 naming Read unless the caller may read the content. */
  checkRead(user: Principal, head: Snapshot): void {
    if (!this.mayRead(user, head)) throw permissionDenied('Read', user);
  }

  /**
   * The answer of a content that does not exist (`missing`) unless the caller may read it: for
   * answers about a content's versions (compare, CONTRACT §15), where a caller without Read must
   * learn nothing, not even that the content has versions to refuse.
   */
  checkReadOrMissing(user: Principal, head: Snapshot, missing: () => AppError): void {
    if (!this.mayRead(user, head)) throw missing();
  }

  /**
   * Read of a workspace draft (spec's workspace permission table): when the content exists in
   * main, Read on the original; when it exists only on the workspace, Read on its type in any
   * context the caller holds roles in. `original` is the content's head in main, also when it
   * was deleted there after the draft was made: such a draft holds the original's aspects, and
   * keeps its contexts.
   */
  mayReadDraft(user: Principal, draft: Pick<Draft, 'type'> | null, original: Snapshot | null): boolean {
    return original ? this.mayRead(user, original) : canInAnyContext(this.d.security, user, 'Read', draft!.type);
  }

  /** 403 naming Read unless `mayReadDraft`. */
  checkDraftRead(user: Principal, draft: Draft | null, original: Snapshot | null): void {
    if (!this.mayReadDraft(user, draft, original)) throw permissionDenied('Read', user);
  }

  /**
   * May the caller (null: no token) see version `versionKey` of the content whose current state
   * is `head`, at `now`? With a token Read, without one a public view (inlined search results,
   * taxonomy nodes of the content hierarchy).
   */
  mayReadVersion(user: Principal | null, head: Snapshot, versionKey: string, now: number): boolean {
    return mayReadVersion(this.rules, user, head, versionKey, now);
  }

  /**
   * File delivery of one version (CONTRACT §12): a version on a public view now is delivered to
   * anyone; any other needs Read (no token 401, a token without Read 403).
   */
  checkVersionDelivery(user: Principal | null, head: Snapshot, versionKey: string): void {
    if (this.publicVersions(head).includes(versionKey)) return;
    if (!user || !this.mayRead(user, head)) throw this.deliveryDenied(user);
  }

  /**
   * File delivery by alias: the version delivered to the caller. Who may read gets the latest
   * version; anyone else the version on a public view; nobody else anything (401 or 403).
   */
  deliveredVersion(user: Principal | null, head: Snapshot): string {
    const publicKeys = this.publicVersions(head);
    if (user && this.mayRead(user, head)) return head.head;
    if (publicKeys.length) return publicKeys[0];
    throw this.deliveryDenied(user);
  }

  /**
   * The filters (fq values) of a search or completion query: what the caller may see (the
   * filter form of `mayReadVersion`), and when a view is asked for, the documents on that view.
   */
  searchFilters(user: Principal | null, view: string | null, now: number): string[] {
    const fqs = [visibilityFilter(this.rules, user, now)];
    if (view !== null) fqs.push(onViewFilter(view, now));
    return fqs;
  }

  /** Seconds a shared cache may keep a public delivery of this version, at most `max` (see publicUntil); 0 when it is not public. */
  publicLifetime(head: Snapshot, versionKey: string, max: number): number {
    const now = this.d.clock();
    if (!publicVersionKeys(head, this.rules.publicViews, now).includes(versionKey)) return 0;
    const until = publicUntil(head, this.rules.publicViews, versionKey, now);
    return until === null ? max : Math.max(0, Math.min(max, Math.floor((until - now) / 1000)));
  }

  /** Versions on a public view now (inside its time state), none for hidden content. */
  private publicVersions(head: Snapshot): string[] {
    return publicVersionKeys(head, this.rules.publicViews, this.d.clock());
  }

  private deliveryDenied(user: Principal | null): AppError {
    return user ? permissionDenied('Read', user) : new AppError('NOT_AUTHENTICATED', 'X-Auth-Token required: the content is not on a public view');
  }
}
