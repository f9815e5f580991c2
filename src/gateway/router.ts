import { AppError } from '../errors.js';
import type { Exchange } from './http.js';

export type Params = Record<string, string>;
export type Handler = (x: Exchange, params: Params) => Promise<void>;

interface Route {
  pattern: string[];
  /** The pattern as written, for metrics and the OpenAPI document. */
  name: string;
  methods: Record<string, Handler>;
}

/**
 * A small router over decoded path segments. A pattern segment is a literal, `:name` (any one
 * segment) or `#name` (digits only: a revision). A path that matches with another method
 * answers 405 with `Allow`.
 */
export class Router {
  private readonly routes: Route[] = [];

  on(method: string, pattern: string, handler: Handler): this {
    const segs = pattern.split('/').filter(Boolean);
    const name = segs.join('/');
    let route = this.routes.find((r) => r.name === name);
    if (!route) {
      route = { pattern: segs, name, methods: {} };
      this.routes.push(route);
    }
    route.methods[method] = handler;
    return this;
  }

  /** Every route: its pattern and methods (for the OpenAPI document). */
  describe(): { pattern: string; methods: string[] }[] {
    return this.routes.map((r) => ({ pattern: r.name, methods: Object.keys(r.methods) }));
  }

  /** Finds the handler; throws 404 (no route) or 405 (route, other method). */
  match(method: string, segs: string[]): { handler: Handler; params: Params; pattern: string } {
    let allowed: string[] | null = null;
    for (const r of this.routes) {
      const params = matchPattern(r.pattern, segs);
      if (!params) continue;
      const h = r.methods[method] ?? (method === 'HEAD' ? r.methods.GET : undefined);
      if (h) return { handler: h, params, pattern: r.name };
      allowed = Object.keys(r.methods);
    }
    if (allowed) throw new AppError('METHOD_NOT_ALLOWED', `Method ${method} not allowed here`, { allow: allowed });
    throw new AppError('NOT_FOUND', 'No such resource');
  }
}

const REVISION = /^[1-9][0-9]{0,14}$/;

/** The params of `segs` when they match `pattern`, else null (its literals are compared before anything is allocated). */
function matchPattern(pattern: string[], segs: string[]): Params | null {
  if (pattern.length !== segs.length) return null;
  for (let i = 0; i < pattern.length; i++) {
    const p = pattern[i];
    if (p[0] === ':') continue;
    if (p[0] === '#' ? !REVISION.test(segs[i]) : p !== segs[i]) return null;
  }
  const params: Params = {};
  for (let i = 0; i < pattern.length; i++) {
    const p = pattern[i];
    if (p[0] === ':' || p[0] === '#') params[p.slice(1)] = segs[i];
  }
  return params;
}
