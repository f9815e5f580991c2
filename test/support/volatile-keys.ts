/**
 * Keys that change with no request at all: leases and heartbeats of every role (actors, change
 * feed schedule, audit copier, webhooks fan-out, archiver), command and reply streams, the indexer's and
 * re-indexer's bookkeeping, and tokens, each user's live tokens and login counts (written by logins
 * and JWT exchanges). Tests that prove a
 * refused request changes nothing compare every other key. Lua patterns, so the property test
 * can match them inside Redis (`string.find`); `isVolatileKey` matches the same in JavaScript.
 */
export const VOLATILE_KEY_PATTERNS = [
  '^security:token:',
  // the live tokens of each user (TOKENS_PER_USER_MAX), written with the token
  '^security:user%-tokens:',
  '^security:login%-failures:',
  '^reply:',
  '^cmd:{',
  '^actors:members$',
  '^lease:',
  '^indexer%-dead:{',
  '^indexer:refused$',
  // the root documents the indexer sent for each content (src/actors/index-writer.ts)
  '^ixd:{',
  '^reindex:',
  '^changes:owner$',
  '^changes:trimmed:',
  '^audit:owner$',
  '^audit:flushed$',
  // written by the audit copier after the commit it records (a commit's own keys, events:{p} among them, are compared)
  '^auditlog:{',
  '^webhooks:members$',
  '^wh:{%d+}:lock$',
  '^arc:{%d+}:lease$',
  '^arc:{%d+}:stats$',
  '^ar:{%d+}:',
];

/** A Lua pattern of the list above as a RegExp: `%x` escapes x, `%d` is a digit. */
function regExpOf(lua: string): RegExp {
  let out = '';
  for (let i = 0; i < lua.length; i++) {
    const c = lua[i];
    if (c === '%') {
      const n = lua[++i];
      out += n === 'd' ? '\\d' : n.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&');
    } else if ((c === '^' && i === 0) || (c === '$' && i === lua.length - 1) || c === '+') out += c;
    else out += c.replace(/[.*?${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(out);
}

const VOLATILE = VOLATILE_KEY_PATTERNS.map(regExpOf);

export const isVolatileKey = (key: string): boolean => VOLATILE.some((re) => re.test(key));
