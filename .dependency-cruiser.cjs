/**
 * The layering of src/ (README "Where is the rule for X"), checked in `npm test`:
 * gateway -> actors -> content, adapters -> content, and content imports nothing of theirs.
 * No import cycles anywhere.
 */
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    { name: 'no-cycles', severity: 'error', comment: 'An import cycle ties two modules into one; split the shared part out.', from: {}, to: { circular: true } },
    {
      name: 'content-is-pure',
      severity: 'error',
      comment: 'src/content is the domain: no I/O, no HTTP, no Redis; it imports only itself, src/errors.ts and zod.',
      from: { path: '^src/content/', pathNot: '\\.test\\.ts$' },
      to: { pathNot: ['^src/content/', '^src/errors\\.ts$', '(^|/)node_modules/zod/'] },
    },
    { name: 'adapters-below-actors', severity: 'error', comment: 'Adapters talk to Redis, Solr and S3 for the layers above; they import only content.', from: { path: '^src/adapters/' }, to: { path: '^src/(actors|gateway|security|client)/' } },
    { name: 'actors-below-gateway', severity: 'error', comment: 'Actors run commands; HTTP is the gateway\'s.', from: { path: '^src/actors/' }, to: { path: '^src/(gateway|client)/' } },
    { name: 'security-below-gateway', severity: 'error', comment: 'Tokens and file access rules are called by the gateway and the actors, never the other way.', from: { path: '^src/security/' }, to: { path: '^src/(gateway|actors|client)/' } },
    {
      name: 'webhooks-beside-gateway',
      severity: 'error',
      comment: 'The webhooks role reads the event streams and calls out over HTTP; the management API in the gateway calls it, never the other way, and it uses no actor internals.',
      from: { path: '^src/webhooks/' },
      to: { path: '^src/(gateway|actors|client|dev)/' },
    },
    { name: 'webhooks-above-adapters', severity: 'error', comment: 'Adapters, security and actors know nothing of the webhooks.', from: { path: '^src/(adapters|security|actors|content)/' }, to: { path: '^src/webhooks/' } },
    { name: 'client-stands-alone', severity: 'error', comment: 'The typed client ships to API users: it imports nothing of the server.', from: { path: '^src/client/' }, to: { path: '^src/', pathNot: '^src/client/' } },
    { name: 'console-ui-apart', severity: 'error', comment: 'console/ is the browser code of the web console: the gateway serves its files as bytes and never imports them.', from: { path: '^(src|config)/' }, to: { path: '^console/' } },
    { name: 'no-dev-tooling-in-product', severity: 'error', comment: 'src/dev launches local servers for development and tests only.', from: { path: '^src/', pathNot: ['^src/dev/', '^src/main\\.ts$', '\\.test\\.ts$'] }, to: { path: '^src/dev/' } },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(node_modules|dist)/' },
    tsPreCompilationDeps: true,
    // TypeScript 7 is outside dependency-cruiser's range for its own parser; swc reads the sources.
    parser: 'swc',
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
  },
};
