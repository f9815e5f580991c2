import type { ContentStore } from '../adapters/content-store.js';
import type { ContentDocs, SearchDoc } from '../adapters/search-engine.js';
import { INDEXING_VARIANT, type Variants } from '../content/variants.js';
import { resolveView } from '../content/views.js';
import { taxonomyContentOf } from './content/taxonomy-references.js';
import { searchBlock } from '../content/search-document.js';
import { versionId } from '../content/model.js';
import type { Logger } from '../adapters/log.js';

/**
 * What the index holds for a content (spec Events 2-4, CONTRACT §9): one document per version
 * that is currently on an indexed view, each the version in the svcIndexing variant; nothing
 * once the content is deleted. Time state is not applied here: the document carries its
 * windows and searches apply them, so a window opening needs no re-index. Whatever the
 * composers made, the indexer sets `id` and `root` and derives the child documents' ids
 * (`searchBlock`, CONTRACT §20): no composer can name another content's document. A content
 * stored before the bounds of search documents (views, date ranges, tag paths) is indexed held
 * to them: the indexed views are the views kept first, and each bound a composer held it to is
 * logged (and listed in the document's `svc_index_trimmed_ss`).
 */
export class IndexingRules {
  constructor(
    private readonly store: ContentStore,
    private readonly variants: Variants,
    private readonly indexedViews: string[],
    private readonly log?: Logger,
  ) {}

  async docsOf(cid: string): Promise<ContentDocs> {
    const head = await this.store.head(cid);
    if (!head || head.deleted) return { cid, docs: [], gone: true };
    const keys = new Set<string>();
    for (const v of this.indexedViews) {
      const k = resolveView(head, v);
      if (k !== null) keys.add(k);
    }
    const docs: SearchDoc[] = [];
    for (const key of keys) {
      const version = await this.store.version(cid, key);
      if (!version) continue;
      const aspects = await this.variants.apply(INDEXING_VARIANT, {
        snapshot: head,
        version,
        hasTaxonomyContent: taxonomyContentOf(this.store, version.aspects),
        preferredViews: this.indexedViews,
        trimmed: (note) =>
          this.log?.warn(
            { cid, version: versionId(cid, key), trimmed: note },
            'search document held to its bounds (content stored before them); the rest is not indexed',
          ),
      });
      const doc = aspects?.svcSolrDocument;
      if (!doc) continue; // not available in svcIndexing: not indexed
      const { _type, ...fields } = doc;
      docs.push(searchBlock(fields as SearchDoc, versionId(cid, key)));
    }
    return { cid, docs, firstRevision: head.rev === 1 };
  }
}
