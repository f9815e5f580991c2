import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { isPasswordHash } from './passwords.js';
import type { SecurityConfig } from '../content/permissions.js';

/**
 * config/security.json: the role table and the development accounts of CONTRACT §3.
 * The development accounts are created in Redis on first start with no accounts; each one's
 * default password is its username, and only its scrypt hash is stored here.
 */

const name = z
  .string()
  .min(1)
  .max(256)
  .refine((s) => s !== '__proto__', 'reserved name');

const accountSchema = z.strictObject({
  passwordHash: z.string().refine(isPasswordHash, 'must be scrypt$N$r$p$saltB64$hashB64'),
  contexts: z.record(name, z.array(name)),
});

export const securityConfigSchema = z
  .strictObject({
    $comment: z.string().optional(),
    roles: z.record(name, z.record(name, z.array(name))),
    users: z.record(name, accountSchema),
  })
  .superRefine((cfg, ctx) => {
    for (const [user, acct] of Object.entries(cfg.users)) {
      for (const [context, roles] of Object.entries(acct.contexts)) {
        for (const role of roles) {
          if (!Object.hasOwn(cfg.roles, role)) {
            ctx.addIssue({ code: 'custom', path: ['users', user, 'contexts', context], message: `unknown role "${role}"` });
          }
        }
      }
    }
  });

/** A stored account as configured: its password hash and its roles per context. */
export interface AccountConfig {
  passwordHash: string;
  contexts: Record<string, string[]>;
}

/** The role table plus the development accounts. */
export interface SecurityConfigWithUsers extends SecurityConfig {
  users: Record<string, AccountConfig>;
}

// The file sits at <repo>/config; this module runs from <repo>/src/security (tsx) or
// <repo>/dist/src/security (built), so look two and three levels up.
const CANDIDATES = ['../../config/security.json', '../../../config/security.json'];

/** Where config/security.json is found from this module. */
export function defaultSecurityConfigPath(): string {
  for (const rel of CANDIDATES) {
    const p = fileURLToPath(new URL(rel, import.meta.url));
    if (existsSync(p)) return p;
  }
  throw new Error(`config/security.json not found (looked at ${CANDIDATES.join(', ')} from ${fileURLToPath(import.meta.url)})`);
}

/** Parses and validates a security configuration; throws an Error naming every bad field. */
export function parseSecurityConfig(raw: unknown, source = 'security config'): SecurityConfigWithUsers {
  const parsed = securityConfigSchema.safeParse(raw);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new Error(`Invalid ${source}:\n${lines.join('\n')}`);
  }
  return { roles: parsed.data.roles, users: parsed.data.users };
}

/** Reads and validates config/security.json (or `path`). */
export function loadSecurityConfig(path: string = defaultSecurityConfigPath()): SecurityConfigWithUsers {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch (e) {
    throw new Error(`Cannot read security config ${path}: ${(e as Error).message}`);
  }
  return parseSecurityConfig(raw, path);
}
