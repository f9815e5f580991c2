package platform;

import org.apache.solr.client.solrj.SolrQuery;
import org.apache.solr.client.solrj.impl.Http2SolrClient;
import org.apache.solr.client.solrj.request.QueryRequest;
import org.apache.solr.client.solrj.response.QueryResponse;

/**
 * The README's SolrJ example, compiled with every build of this tool so that it stays valid
 * (`java -cp 'target/classes:target/lib/*' platform.ReadmeExample http://localhost:8080 TOKEN`).
 */
public final class ReadmeExample {
  public static void main(String[] args) throws Exception {
    String base = args[0];
    String token = args[1];
    try (var solr = new Http2SolrClient.Builder(base + "/search-service")
            .useHttp1_1(true)                 // the gateway speaks HTTP/1.1
            .build()) {                       // or: new HttpJdkSolrClient.Builder(url).build()
      var query = new SolrQuery("election")   // full text; or field queries: svc_type_s:article
          .setRows(10).setStart(0)
          .addSort("id", SolrQuery.ORDER.asc)
          .setFacet(true).addFacetField("svc_type_s");
      var request = new QueryRequest(query);
      request.addHeader("X-Auth-Token", token);  // from POST /content-service/security/token
      QueryResponse answer = request.process(solr, "content");
      answer.getResults().forEach(doc -> System.out.println(doc.get("id")));
      answer.getFacetField("svc_type_s").getValues().forEach(c -> System.out.println(c.getName() + " " + c.getCount()));
    }
  }
}
