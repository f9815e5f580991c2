import { z } from 'zod';
import { CHANGE_KINDS } from '../content/change-events.js';
import { DELIVERY_STATUSES } from '../webhooks/keys.js';
import { tokenRequestSchema } from '../security/token-service.js';
import { webhookBodySchema } from '../webhooks/webhook-store.js';
import { envelopeSchema, viewBodySchema } from './schemas.js';

/**
 * The named schemas of the OpenAPI document (`#/components/schemas/<name>`): the request bodies
 * are the zod schemas that validate them (schemas.ts, token-service.ts, webhook-store.ts); the
 * answers are described here, in zod too, so that one converter makes the whole document and a
 * typed client can be derived from either. Answers are described as the code gives them: an
 * object the platform may add fields to is a loose object.
 */

/** The error body of every 4xx/5xx (CONTRACT §11, src/errors.ts). Search errors add the engine's `error`. */
export const errorBodySchema = z.looseObject({
  message: z.string(),
  statusCode: z.string().regex(/^[0-9]{5}$/),
  extraInfo: z.record(z.string(), z.unknown()),
});

const status = z.looseObject({
  message: z.string(),
  statusCode: z.string().regex(/^[0-9]{5}$/),
  extraInfo: z.record(z.string(), z.unknown()),
  subResults: z.array(z.looseObject({})).optional(),
});

const isoTime = z.iso.datetime();

/** The content envelope of an answer (spec "Content envelope"): system fields, aspects, status. */
export const contentAnswerSchema = z.looseObject({
  system: z.looseObject({
    id: z.string(),
    version: z.string(),
    creationTime: isoTime,
    modificationTime: isoTime,
    contentType: z.string(),
  }),
  aspects: z.looseObject({ _type: z.string() }),
  /** Workspace drafts: their pending operations. */
  operations: z.array(z.looseObject({ _type: z.string() })).optional(),
  status: status.optional(),
});

/** The 303 of an unversioned read (CONTRACT §5). */
export const redirectSchema = z.looseObject({
  statusCode: z.literal(30300),
  message: z.string(),
  location: z.string(),
});

export const historySchema = z.looseObject({
  versions: z.array(
    z.looseObject({
      version: z.string(),
      revision: z.looseObject({ contentId: z.string(), revisionNumber: z.number().int() }),
      creationTime: z.number(),
      creatorId: z.string(),
      views: z.array(z.string()),
      restoredFrom: z.string().optional(),
    }),
  ),
});

export const tokenResponseSchema = z.looseObject({
  token: z.string(),
  userId: z.string(),
  expireTime: z.string().regex(/^[0-9]+$/),
  renewTime: z.string().regex(/^[0-9]+$/),
});

export const authorizationInfoSchema = z.looseObject({
  contexts: z.record(z.string(), z.array(z.string())),
  roles: z.record(z.string(), z.record(z.string(), z.array(z.string()))),
});

export const workspaceInfoSchema = z.looseObject({
  workspaceId: z.string(),
  drafts: z.record(z.string(), z.looseObject({})),
});

export const fileInfoSchema = z.looseObject({
  URI: z.string(),
  length: z.number().int(),
  creationTime: z.number(),
  modifiedTime: z.number(),
  accessTime: z.number(),
  mimeType: z.string(),
  originalPath: z.string().optional(),
});

/** A search answer: the engine's JSON as it gave it (with `_content` per document when `inlineData` is set). */
export const searchAnswerSchema = z.looseObject({
  responseHeader: z.looseObject({}).optional(),
  response: z
    .looseObject({
      numFound: z.number().int(),
      start: z.number().int(),
      docs: z.array(z.looseObject({ _content: z.union([contentAnswerSchema, z.null()]).optional() })),
    })
    .optional(),
});

export const taxonomyEntitySchema: z.ZodType = z.lazy(() =>
  z.looseObject({
    id: z.string(),
    name: z.string(),
    entities: z.array(taxonomyEntitySchema),
    attributes: z.record(z.string(), z.unknown()).optional(),
    childrenOmitted: z.boolean(),
  }),
);

/** A taxonomy, dimension or entity with its children (spec "Taxonomy service"). */
export const taxonomyNodeSchema = z.looseObject({
  id: z.string(),
  name: z.string(),
  dimensions: z.array(z.looseObject({ id: z.string(), entities: z.array(taxonomyEntitySchema) })).optional(),
  entities: z.array(taxonomyEntitySchema).optional(),
  childrenOmitted: z.boolean().optional(),
});

export const changeEventSchema = z.looseObject({
  cursor: z.string(),
  kind: z.enum(CHANGE_KINDS),
  id: z.string(),
  version: z.string(),
  revision: z.number().int(),
  contentType: z.string(),
  views: z.array(z.string()),
  aliases: z.array(z.string()),
  committer: z.string(),
  time: isoTime,
  view: z.string().optional(),
  action: z.enum(['set', 'removed']).optional(),
  visible: z.boolean().optional(),
});

export const changePageSchema = z.looseObject({ changes: z.array(changeEventSchema), last: z.string() });

export const webhookSchema = z.looseObject({
  id: z.string(),
  url: z.string(),
  types: z.array(z.string()),
  views: z.array(z.string()),
  kinds: z.array(z.string()),
  description: z.string(),
  created: isoTime,
  updated: isoTime,
  /** Only in the answer to the creation. */
  secret: z
    .string()
    .regex(/^whsec_/)
    .optional(),
});

export const webhookListSchema = z.looseObject({ webhooks: z.array(webhookSchema) });

export const deliveriesSchema = z.looseObject({
  deliveries: z.array(
    z.looseObject({
      id: z.string(),
      eventId: z.string(),
      status: z.enum(DELIVERY_STATUSES),
      attempts: z.number().int(),
      lastStatus: z.number().int().nullable(),
      lastError: z.string().nullable(),
      nextAttempt: isoTime.nullable(),
      time: isoTime,
    }),
  ),
});

export const compareSchema = z.looseObject({
  from: z.string(),
  to: z.string(),
  patch: z.array(z.looseObject({ op: z.enum(['add', 'remove', 'replace', 'move', 'copy', 'test']), path: z.string() })),
});

export const auditSchema = z.looseObject({
  entries: z.array(
    z.looseObject({
      time: isoTime,
      user: z.string(),
      action: z.string(),
      id: z.string(),
      version: z.string().nullable(),
      revision: z.number().int(),
      via: z.string(),
      requestId: z.string().nullable(),
    }),
  ),
  next: z.string().nullable(),
});

export const healthSchema = z.looseObject({
  status: z.enum(['ok', 'degraded', 'unavailable']),
  redis: z.string(),
  search: z.string(),
  files: z.string(),
});

/** Answer schemas by component name. */
const groupLag = z.looseObject({ lag: z.number().int().nullable(), pending: z.number().int() });

/** GET /content-service/operations (sysadmin): the operations page's snapshot (CONTRACT §19). */
export const operationsSchema = z.looseObject({
  time: isoTime,
  members: z.array(z.looseObject({ id: z.string(), lastSeen: isoTime })),
  partitions: z.array(
    z.looseObject({
      partition: z.number().int(),
      owner: z.string().nullable(),
      mailbox: groupLag,
      indexer: groupLag,
      deadLetters: z.number().int(),
      indexerDeadLetters: z.number().int(),
      webhooksPending: z.number().int(),
    }),
  ),
  reindexSessions: z.array(
    z.looseObject({ session: z.string(), total: z.number().int(), done: z.number().int(), started: z.number().nullable(), completed: z.number().nullable() }),
  ),
  webhooks: z.looseObject({ pending: z.number().int(), outcomes: z.record(z.string(), z.number()) }),
});

export const ANSWER_SCHEMAS = {
  ErrorBody: errorBodySchema,
  ContentAnswer: contentAnswerSchema,
  Redirect: redirectSchema,
  History: historySchema,
  TokenResponse: tokenResponseSchema,
  AuthorizationInfo: authorizationInfoSchema,
  WorkspaceInfo: workspaceInfoSchema,
  FileInfo: fileInfoSchema,
  SearchAnswer: searchAnswerSchema,
  TaxonomyNode: taxonomyNodeSchema,
  TaxonomyEntity: taxonomyEntitySchema,
  ChangeEvent: changeEventSchema,
  ChangePage: changePageSchema,
  Webhook: webhookSchema,
  WebhookList: webhookListSchema,
  Deliveries: deliveriesSchema,
  Compare: compareSchema,
  Audit: auditSchema,
  Health: healthSchema,
  Operations: operationsSchema,
} as const satisfies Record<string, z.ZodType>;

/** Request body schemas by component name: the ones the handlers validate with. */
export const REQUEST_SCHEMAS = {
  ContentEnvelope: envelopeSchema,
  ViewBody: viewBodySchema,
  TokenRequest: tokenRequestSchema,
  WebhookBody: webhookBodySchema,
} as const satisfies Record<string, z.ZodType>;

export type AnswerSchema = keyof typeof ANSWER_SCHEMAS;
export type RequestSchema = keyof typeof REQUEST_SCHEMAS;
