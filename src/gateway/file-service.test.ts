import { expect } from 'chai';
import { deliveryContentType, fileInfoOf } from './file-service.js';
import { keptMediaType } from '../adapters/file-store.js';
import type { StoredFile } from '../adapters/file-store.js';

/**
 * A type kept before keptMediaType existed (a list such as `text/plain;,text/html`, which
 * browsers read by its last entry) is served and listed as it would be kept now, on every path:
 * delivery, the file service's download and its info.
 */
describe('stored media types as served', () => {
  const legacy = (mimeType: string): StoredFile =>
    ({
      key: { space: 'tmp', host: 'editor', path: 'o/page' },
      storageKey: 'tmp/editor/o/page',
      objectId: 'o',
      length: 1,
      creationTime: 1,
      modifiedTime: 1,
      accessTime: -1,
      mimeType,
      originalPath: 'page',
    }) as unknown as StoredFile;

  it('keeps type/subtype and charset, nothing else, and never a list', () => {
    expect(keptMediaType('text/plain; charset=utf-8')).to.equal('text/plain; charset=utf-8');
    expect(keptMediaType('text/plain; format=flowed; charset="utf-8"')).to.equal('text/plain; charset=utf-8');
    expect(keptMediaType('text/plain;,text/html')).to.equal(null);
    expect(keptMediaType('image/png, image/svg+xml')).to.equal(null);
    expect(keptMediaType('text/plain\r\nX-Injected: 1')).to.equal(null);
  });

  it('a list kept before is served and listed as application/octet-stream', () => {
    expect(fileInfoOf(legacy('text/plain;,text/html')).mimeType).to.equal('application/octet-stream');
    expect(deliveryContentType('text/plain;,text/html', 'page')).to.equal('application/octet-stream');
    expect(fileInfoOf(legacy('text/plain')).mimeType).to.equal('text/plain');
  });
});
