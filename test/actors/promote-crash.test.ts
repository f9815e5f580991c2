import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { Redis } from 'ioredis';
import { Client, article, startTestPlatform } from '../support/platform.js';
import { until } from '../support/wait.js';

type P = Awaited<ReturnType<typeof startTestPlatform>>;
const ENV = { PARTITIONS: '2', LEASE_MS: '1000' };

function actorProcess(): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', 'src/main.ts', 'actors'], {
    env: { ...process.env, ...ENV, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}

describe('workspaces: the actor owning a content killed during a promote (issue 4)', function () {
  this.timeout(120000);
  let p: P;
  let editor: Client;
  let redis: Redis;
  let actor: ChildProcess;

  const ownsAll = async () => {
    const owners = await Promise.all([0, 1].map((i) => redis.get(`lease:{${i}}`)));
    return owners.every((o) => o !== null && Number(o.split(':')[1]) === actor.pid);
  };

  before(async () => {
    redis = new Redis(process.env.REDIS_URL!);
    p = await startTestPlatform({ ...ENV, ACTOR_REPLY_TIMEOUT_MS: '20000' }, ['web']);
    editor = await new Client(p.base).login('editor');
    actor = actorProcess();
    await until(ownsAll, 20000);
  });
  after(async () => {
    actor?.kill('SIGKILL');
    await p?.stop();
    redis.disconnect();
  });

  for (const delay of [0, 2, 5, 10]) {
    it(`the promote is complete or not visible at all, and a retry completes it (kill after ${delay} ms)`, async () => {
      const ws = `crash${delay}x${Date.now()}`;
      const ns = `pc${delay}x${Date.now()}`;
      const d = await editor.req('POST', `/content/workspace/${ws}`, {
        body: { ...article('promoted'), operations: [{ _type: 'svcSetAlias', namespace: ns, alias: 'a' }] },
      });
      expect(d.status).to.equal(201);
      const id = d.json.system.id;

      const promote = editor.req('POST', `/content/workspace/${ws}/alias/${id}/promote`);
      await new Promise((r) => setTimeout(r, delay));
      actor.kill('SIGKILL');
      // while no actor runs, the promote is either all there or not at all
      const main = await editor.req('GET', `/content/alias/${id}`);
      const draft = await editor.req('GET', `/content/workspace/${ws}/alias/${id}`);
      if (main.status === 303) expect(draft.json.system.version, 'promoted: the draft is gone').to.match(/^c:/);
      else {
        expect(main.status).to.equal(404);
        expect(draft.json.system.version, 'not promoted: the draft stays').to.match(/^draft:/);
      }
      actor = actorProcess();
      await until(ownsAll, 20000);

      const first = await promote;
      expect([200, 503]).to.include(first.status);
      const retry = await editor.req('POST', `/content/workspace/${ws}/alias/${id}/promote`);
      expect(first.status === 200 ? [404] : [200, 404]).to.include(retry.status);

      // the content is in main exactly once, with its alias
      const h = await editor.read(`/content/alias/${id}/history`);
      expect(h.json.versions).to.have.length(1);
      expect((await editor.read(`/content/alias/${ns}/a`)).json.aspects.body.title).to.equal('promoted');
      expect((await editor.req('GET', `/content/workspace/${ws}`)).json.drafts).to.deep.equal({});
    });
  }
});
