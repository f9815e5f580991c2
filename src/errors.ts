/**
 * The one registry of errors the platform can answer. Each entry maps a name to the spec's
 * five-digit statusCode, its HTTP status and a default message. Errors are values: actors
 * reply with them, the gateway maps them to the error body in one place (gateway/http.ts).
 */
export const ERRORS = {
  BAD_REQUEST: { statusCode: '40000', http: 400, message: 'Bad request' },
  NOT_AUTHENTICATED: { statusCode: '40100', http: 401, message: 'Not authenticated' },
  PERMISSION_DENIED: { statusCode: '40300', http: 403, message: 'Permission denied' },
  NOT_FOUND: { statusCode: '40400', http: 404, message: 'Not found' },
  VERSION_NOT_FOUND: { statusCode: '40403', http: 404, message: 'VERSION_NOT_FOUND' },
  METHOD_NOT_ALLOWED: { statusCode: '40500', http: 405, message: 'Method not allowed' },
  CONTENT_MODIFIED: { statusCode: '40900', http: 409, message: 'Content was modified' },
  CONCURRENT_CONFLICT: { statusCode: '40901', http: 409, message: 'CONCURRENT_CONFLICT' },
  NOT_FOUND_CONFLICT: { statusCode: '40904', http: 409, message: 'NOT_FOUND_CONFLICT' },
  MAIN_ALIAS_IN_USE: { statusCode: '40905', http: 409, message: 'A main alias cannot be released while its content exists' },
  ALIAS_EXISTS: { statusCode: '40910', http: 409, message: 'ALIAS_EXISTS' },
  GONE: { statusCode: '41000', http: 410, message: 'Gone' },
  PRECONDITION_FAILED: { statusCode: '41200', http: 412, message: 'Precondition failed' },
  PAYLOAD_TOO_LARGE: { statusCode: '41300', http: 413, message: 'Payload too large' },
  UNSUPPORTED_MEDIA_TYPE: { statusCode: '41500', http: 415, message: 'Unsupported media type' },
  RANGE_NOT_SATISFIABLE: { statusCode: '41600', http: 416, message: 'Range not satisfiable' },
  UNPROCESSABLE: { statusCode: '42200', http: 422, message: 'Unprocessable content' },
  TOO_MANY_REQUESTS: { statusCode: '42900', http: 429, message: 'Too many requests' },
  INTERNAL: { statusCode: '50000', http: 500, message: 'Internal server error' },
  UNAVAILABLE: { statusCode: '50300', http: 503, message: 'Service unavailable' },
} as const;

export type ErrorName = keyof typeof ERRORS;

/** Marks AppErrors across copies of this module (a module loaded twice, as tsx may do for a dynamic import). */
const BRAND = Symbol.for('content-platform.AppError');

/** A failure with the spec's statusCode; `extraInfo` goes into the error body unchanged. */
export class AppError extends Error {
  readonly [BRAND] = true;

  /** `instanceof AppError` holds for AppErrors of every copy of this module. */
  static override [Symbol.hasInstance](value: unknown): boolean {
    return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[BRAND] === true;
  }

  readonly code: ErrorName;
  readonly statusCode: string;
  readonly http: number;
  readonly extraInfo: Record<string, unknown>;
  /** Seconds for a `Retry-After` header (429 and 503). */
  readonly retryAfter?: number;

  constructor(code: ErrorName, message?: string, extraInfo: Record<string, unknown> = {}, retryAfter?: number) {
    const def = ERRORS[code];
    super(message ?? def.message);
    this.name = 'AppError';
    this.code = code;
    this.statusCode = def.statusCode;
    this.http = def.http;
    this.extraInfo = extraInfo;
    this.retryAfter = retryAfter;
  }

  /** The spec's error body. */
  toBody(): { message: string; statusCode: string; extraInfo: Record<string, unknown> } {
    return { message: this.message, statusCode: this.statusCode, extraInfo: this.extraInfo };
  }

  /** A plain object that survives msgpack (actor replies carry errors as values). */
  toWire(): WireError {
    const w: WireError = { code: this.code, message: this.message, extraInfo: this.extraInfo };
    if (this.retryAfter !== undefined) w.retryAfter = this.retryAfter;
    return w;
  }

  static fromWire(w: WireError): AppError {
    return new AppError(w.code, w.message, w.extraInfo, typeof w.retryAfter === 'number' ? w.retryAfter : undefined);
  }
}

export interface WireError {
  code: ErrorName;
  message: string;
  extraInfo: Record<string, unknown>;
  /** Seconds for `Retry-After`, when the error has them (an actor's 503). */
  retryAfter?: number;
}

export const isAppError = (e: unknown): e is AppError => e instanceof AppError;
