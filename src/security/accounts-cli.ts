/**
 * Account administration against the platform's Redis (REDIS_URL), without starting the
 * platform. The password is read from stdin (one line), never from the command line.
 *
 *   node dist/src/security/accounts-cli.js set-password <username>        < password
 *   node dist/src/security/accounts-cli.js create <username> '<contexts>' < password
 *   node dist/src/security/accounts-cli.js delete <username>
 *
 * `<contexts>` is JSON: context name -> role names, e.g. '{"__global__":["editor"]}'.
 * It first prints the Redis it writes to (credentials masked).
 */
import { loadSettings, maskUrlCredentials } from '../../config/settings.js';
import { TokenService } from './token-service.js';

async function readPassword(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  const pw = Buffer.concat(chunks)
    .toString('utf8')
    .replace(/\r?\n$/, '');
  if (pw.length < 8) throw new Error('The password (on stdin) must have at least 8 characters');
  return pw;
}

async function main(argv: string[]): Promise<void> {
  const [cmd, username, contextsJson] = argv;
  if (!cmd || !username || !['set-password', 'create', 'delete'].includes(cmd)) {
    throw new Error('usage: accounts-cli set-password <username> | create <username> <contexts JSON> | delete <username>');
  }
  const settings = loadSettings();
  const redisUrl = settings.REDIS_URL ?? 'redis://127.0.0.1:6379';
  // Which Redis the accounts go to, before anything is written (a wrong REDIS_URL is seen at once); never its password.
  console.log(`accounts-cli: Redis ${maskUrlCredentials(redisUrl)}${settings.REDIS_URL ? ' (REDIS_URL)' : ' (the default: REDIS_URL is not set)'}`);
  const service = new TokenService({ redisUrl, settings });
  await service.connect();
  try {
    if (cmd === 'delete') await service.deleteAccount(username);
    else if (cmd === 'set-password') await service.setPassword(username, await readPassword());
    else await service.createAccount(username, await readPassword(), JSON.parse(contextsJson ?? '{}') as Record<string, string[]>);
    console.log(`${cmd} ${username}: done`);
  } finally {
    await service.stop();
  }
}

main(process.argv.slice(2)).catch((e: unknown) => {
  console.error((e as Error).message);
  process.exitCode = 1;
});
