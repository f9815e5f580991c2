import { expect } from 'chai';
import { engineErrorAnswer, scrubEngineMessage } from './search-errors.js';

/** Answers recorded from Solr 9.7 and its Jetty (tools/solr), shortened where long. */
const SYNTAX_400 = JSON.stringify({
  responseHeader: { status: 400, QTime: 5 },
  error: {
    metadata: ['error-class', 'org.apache.solr.common.SolrException', 'root-error-class', 'org.apache.solr.parser.ParseException'],
    msg: 'org.apache.solr.search.SyntaxError: Cannot parse \'svc_type_s:[\': Encountered "<EOF>" at line 1, column 12.\nWas expecting one of:\n    "TO" ...\n    ',
    code: 400,
  },
});
const TRACE_500 = JSON.stringify({
  responseHeader: { status: 500, QTime: 2 },
  error: {
    msg: 'For input string: "x"',
    trace:
      'java.lang.NumberFormatException: For input string: "x"\n\tat java.base/jdk.internal.math.FloatingDecimal.readJavaFormatString(FloatingDecimal.java:2054)\n\tat org.apache.solr.util.SolrPluginUtils.parseFieldBoosts(SolrPluginUtils.java:509)\n\tat org.eclipse.jetty.server.Server.handle(Server.java:563)\n',
    code: 500,
  },
});
const CLOUD_500 = JSON.stringify({
  responseHeader: { status: 500, QTime: 9, params: { q: '*:*', fq: '{!lucene}(+svc_views_ss:svcPublic)' } },
  error: {
    metadata: ['error-class', 'org.apache.solr.client.solrj.impl.BaseHttpSolrClient$RemoteSolrException'],
    msg: 'Error from server at http://10.1.2.3:8983/solr/content_shard1_replica_n1: java.io.IOException: Cannot open /var/solr/data/content/index/segments_7 on solr-node-1.internal:8983 via [fe80::1]:8983 (Solr 9.7.0, Jetty(10.0.22))\n\tat org.apache.solr.Foo.bar(Foo.java:1)\nCaused by: x',
    code: 500,
    details: [{ node: 'solr-node-1.internal:8983' }],
  },
});
const JETTY_404 = `<html>
<head>
<meta http-equiv="Content-Type" content="text/html;charset=iso-8859-1"/>
<title>Error 404 Can not find: /solr/nope/select</title>
</head>
<body><h2>HTTP ERROR 404 Can not find: /solr/nope/select</h2>
<tr><th>SERVLET:</th><td>org.apache.solr.embedded.JettySolrRunner$Servlet404-7fcf2fc1</td></tr>
<hr/><a href="https://jetty.org">Powered by Jetty:// 10.0.22</a><hr/>
</body>
</html>`;

const LEAKS =
  /trace|metadata|details|org\.apache|java\.|jdk\.|Exception|\tat |https?:\/\/|10\.1\.2\.3|8983|internal|\/var\/|Jetty|9\.7|10\.0\.22|html|svc_views_ss/;

describe('engine errors through the search proxy (CONTRACT §12, §20)', () => {
  it('a JSON error keeps the status, msg and code, with the error body of §11; metadata goes, Java class names go', () => {
    const a = engineErrorAnswer('content', { status: 400, contentType: 'application/json;charset=utf-8', body: SYNTAX_400 });
    expect(a.status).to.equal(400);
    const msg = 'Cannot parse \'svc_type_s:[\': Encountered "<EOF>" at line 1, column 12.\nWas expecting one of:\n    "TO" ...';
    expect(a.body).to.deep.equal({ message: msg, statusCode: '40000', extraInfo: {}, responseHeader: { status: 400, QTime: 5 }, error: { msg, code: 400 } });
  });

  it('a 500 by which the engine refuses the query (too complex to determinize, too many clauses) answers 400: bad input never answers 5xx', () => {
    const tooComplex = JSON.stringify({
      responseHeader: { status: 500, QTime: 3 },
      error: {
        metadata: [
          'error-class',
          'org.apache.solr.common.SolrException',
          'root-error-class',
          'org.apache.lucene.util.automaton.TooComplexToDeterminizeException',
        ],
        msg: 'Determinizing automaton with 51 states and 98 transitions would require more than 10000 effort.',
        code: 500,
      },
    });
    const a = engineErrorAnswer('content', { status: 500, contentType: 'application/json', body: tooComplex });
    expect(a.status).to.equal(400);
    const msg = 'Determinizing automaton with 51 states and 98 transitions would require more than 10000 effort.';
    expect(a.body).to.deep.equal({ message: msg, statusCode: '40000', extraInfo: {}, responseHeader: { status: 400, QTime: 3 }, error: { msg, code: 400 } });
    const clauses = JSON.stringify({ responseHeader: { status: 500, QTime: 1 }, error: { msg: 'too many boolean clauses', code: 500 } });
    expect(engineErrorAnswer('content', { status: 500, contentType: 'application/json', body: clauses }).status).to.equal(400);
    // An engine that fails (its disk, another node) stays a 500.
    expect(engineErrorAnswer('content', { status: 500, contentType: 'application/json', body: CLOUD_500 }).status).to.equal(500);
  });

  it('a 500 loses its stack trace; the status stays', () => {
    const a = engineErrorAnswer('content', { status: 500, contentType: 'application/json', body: TRACE_500 });
    expect(a.status).to.equal(500);
    expect(a.body).to.deep.equal({
      message: 'For input string: "x"',
      statusCode: '50000',
      extraInfo: {},
      responseHeader: { status: 500, QTime: 2 },
      error: { msg: 'For input string: "x"', code: 500 },
    });
  });

  it('addresses, host names with ports, file paths, server versions, echoed parameters and frames inside a message go', () => {
    const a = engineErrorAnswer('content', { status: 500, contentType: 'application/json', body: CLOUD_500 });
    const text = JSON.stringify(a.body);
    expect(text).to.not.match(LEAKS);
    expect(a.body.message).to.equal('Error from server at [address]: Cannot open [path] on [address] via [address] (, )');
  });

  it("Jetty's HTML page becomes the error body of §11 with the engine's status", () => {
    const a = engineErrorAnswer('nope', { status: 404, contentType: 'text/html;charset=iso-8859-1', body: JETTY_404 });
    expect(a).to.deep.equal({ status: 404, body: { message: 'The search engine has no collection nope', statusCode: '40400', extraInfo: {} } });
    const b = engineErrorAnswer('content', { status: 502, contentType: 'text/html', body: '<html>Bad gateway nginx/1.22</html>' });
    expect(b).to.deep.equal({ status: 502, body: { message: 'The search engine answered 502', statusCode: '50200', extraInfo: {} } });
    const c = engineErrorAnswer('content', { status: 500, contentType: 'application/json', body: '{"not": "an error"' });
    expect(c.body).to.deep.equal({ message: 'The search engine answered 500', statusCode: '50000', extraInfo: {} });
  });

  it('scrubEngineMessage keeps what the caller sent', () => {
    expect(scrubEngineMessage('undefined field nosuch_s')).to.equal('undefined field nosuch_s');
    expect(scrubEngineMessage("Cannot parse 'n_i:12345 AND a/b/c'")).to.equal("Cannot parse 'n_i:12345 AND a/b/c'");
    expect(scrubEngineMessage("Cannot parse 'tags_ss:[a TO b] id:[1]'")).to.equal("Cannot parse 'tags_ss:[a TO b] id:[1]'");
  });
});
