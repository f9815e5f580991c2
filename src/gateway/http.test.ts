import { expect } from 'chai';
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { Exchange } from './http.js';

/** A uWS response that records what is done with it and, as uWS does, refuses any use once ended or closed. */
function fakeResponse(writeOk: boolean) {
  const calls: string[] = [];
  let done = false;
  let writable: ((offset: number) => boolean) | undefined;
  const use = (name: string) => {
    if (done) throw new Error(`uWS.HttpResponse must not be accessed after it ended (${name})`);
    calls.push(name);
  };
  const res = {
    onAborted: () => res,
    onWritable: (f: (offset: number) => boolean) => {
      writable = f;
      return res;
    },
    cork: (f: () => void) => {
      f();
      return res;
    },
    writeStatus: () => {
      use('writeStatus');
      return res;
    },
    writeHeader: () => {
      use('writeHeader');
      return res;
    },
    write: () => {
      use('write');
      return writeOk;
    },
    end: () => {
      use('end');
      done = true;
      writable = undefined; // uWS forgets an ended response's handlers
      return res;
    },
    close: () => {
      use('close');
      done = true;
      return res;
    },
    pause: () => {
      calls.push('pause');
      return res;
    },
    resume: () => {
      calls.push('resume');
      return res;
    },
    onData: (f: (ab: ArrayBuffer, isLast: boolean) => void) => {
      data = f;
      return res;
    },
  };
  let data: ((ab: ArrayBuffer, isLast: boolean) => void) | undefined;
  return { res: res as unknown as HttpResponse, calls, writable: () => writable, data: () => data! };
}
const request = { getMethod: () => 'get', getUrl: () => '/x', getQuery: () => '', getHeader: () => '' } as unknown as HttpRequest;

describe('Exchange: chunked answers and the stall timer', function () {
  this.timeout(20_000);

  it('an answer ended while a writer waits for the socket lets the writer go, and is never touched after (no close 10 s later)', async () => {
    const f = fakeResponse(false);
    const x = new Exchange(f.res, request, 1024);
    x.beginChunked(200, []);
    expect(x.writeChunk('a line\n')).to.equal(false);
    let released = false;
    void x.drained().then(() => {
      released = true;
    });
    x.endChunked();
    await new Promise((r) => setImmediate(r));
    expect(released, 'the writer waiting for the socket is let go').to.equal(true);
    await new Promise((r) => setTimeout(r, 10_500)); // past STALLED_ANSWER_MS
    expect(f.calls).to.not.include('close');
  });

  it('an answer the client takes none of for 10 s is cut, and its writer let go', async () => {
    const f = fakeResponse(false);
    const x = new Exchange(f.res, request, 1024);
    x.beginChunked(200, []);
    x.writeChunk('a line\n');
    let released = false;
    void x.drained().then(() => {
      released = true;
    });
    await new Promise((r) => setTimeout(r, 10_500));
    expect(f.calls.at(-1)).to.equal('close');
    expect(released).to.equal(true);
  });

  it('a client that takes some of it in time keeps its answer', async () => {
    const f = fakeResponse(false);
    const x = new Exchange(f.res, request, 1024);
    x.beginChunked(200, []);
    x.writeChunk('a line\n');
    const first = x.drained();
    await new Promise((r) => setTimeout(r, 6000));
    f.writable()!(7); // the socket took some
    await first;
    x.writeChunk('another\n');
    void x.drained();
    await new Promise((r) => setTimeout(r, 6000)); // 12 s in all, never 10 s without progress
    expect(f.calls).to.not.include('close');
    x.endChunked();
  });

  it('a streamed body that goes on arriving while paused is paused again each time, and cut past 16 MB held', async () => {
    const f = fakeResponse(true);
    const x = new Exchange(f.res, { ...request, getMethod: () => 'post' } as unknown as HttpRequest, 1024, true);
    const body = x.bodyStream();
    let failed: unknown;
    body.on('error', (e) => {
      failed = e;
    });
    const chunk = new Uint8Array(512 * 1024).buffer;
    f.data()(chunk, false); // 512 KB: over the stream's 256 KB, paused
    expect(f.calls.filter((c) => c === 'pause')).to.have.length(1);
    for (let i = 0; i < 31; i++) f.data()(chunk, false); // uWS reads on (a write armed it): paused again each time
    expect(f.calls.filter((c) => c === 'pause')).to.have.length(32);
    expect(f.calls).to.not.include('close');
    f.data()(chunk, false); // past 16 MB held
    expect(f.calls.at(-1)).to.equal('close');
    await new Promise((r) => setImmediate(r));
    expect(String(failed)).to.match(/faster than it takes its answers/);
  });
});
