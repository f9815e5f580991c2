package platform;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.solr.client.solrj.SolrClient;
import org.apache.solr.client.solrj.SolrRequest;
import org.apache.solr.client.solrj.impl.BaseHttpSolrClient;
import org.apache.solr.client.solrj.impl.Http2SolrClient;
import org.apache.solr.client.solrj.impl.HttpJdkSolrClient;
import org.apache.solr.client.solrj.request.QueryRequest;
import org.apache.solr.client.solrj.response.FacetField;
import org.apache.solr.client.solrj.response.QueryResponse;
import org.apache.solr.common.SolrDocument;
import org.apache.solr.common.params.ModifiableSolrParams;
import org.apache.solr.common.util.Utils;

/**
 * SolrJ against the platform's search proxy, with SolrJ's default response format (javabin).
 *
 * <p>Usage: {@code java platform.SolrjCheck <base URL, e.g. http://host:port/search-service> <client>}
 * where client is {@code http1} (Http2SolrClient with useHttp1_1(true)), {@code jdk}
 * (HttpJdkSolrClient, defaults) or {@code http2} (Http2SolrClient, defaults). Reads requests from
 * stdin, one a line: {@code GET|POST <tab> token or - <tab> URL-encoded parameters}; answers one
 * JSON line each: {@code {"ok":true,"numFound":..,"ids":[..],"facets":{..},"nextCursorMark":..,
 * "response":{the whole answer as SolrJ decoded it}}} or {@code {"ok":false,"code":..,"message":..}}.
 */
public final class SolrjCheck {
  public static void main(String[] args) throws Exception {
    String base = args[0];
    String kind = args.length > 1 ? args[1] : "http1";
    PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    try (SolrClient client = client(base, kind)) {
      BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
      for (String line; (line = in.readLine()) != null; ) {
        if (line.isBlank()) continue;
        out.println(Utils.toJSONString(run(client, line)).replace('\n', ' '));
      }
    }
  }

  private static SolrClient client(String base, String kind) {
    switch (kind) {
      case "http1":
        return new Http2SolrClient.Builder(base).useHttp1_1(true).build();
      case "http2":
        return new Http2SolrClient.Builder(base).build();
      case "jdk":
        return new HttpJdkSolrClient.Builder(base).build();
      default:
        throw new IllegalArgumentException("client: http1, http2 or jdk");
    }
  }

  private static Map<String, Object> run(SolrClient client, String line) {
    String[] parts = line.split("\t", 3);
    ModifiableSolrParams params = new ModifiableSolrParams();
    if (parts.length > 2) {
      for (String pair : parts[2].split("&")) {
        if (pair.isEmpty()) continue;
        int eq = pair.indexOf('=');
        String key = URLDecoder.decode(eq < 0 ? pair : pair.substring(0, eq), StandardCharsets.UTF_8);
        String value = eq < 0 ? "" : URLDecoder.decode(pair.substring(eq + 1), StandardCharsets.UTF_8);
        params.add(key, value);
      }
    }
    QueryRequest request = new QueryRequest(params, "POST".equals(parts[0]) ? SolrRequest.METHOD.POST : SolrRequest.METHOD.GET);
    if (parts.length > 1 && !"-".equals(parts[1])) request.addHeader("X-Auth-Token", parts[1]);
    Map<String, Object> answer = new LinkedHashMap<>();
    try {
      QueryResponse response = request.process(client, "content");
      answer.put("ok", true);
      if (response.getResults() != null) {
        answer.put("numFound", response.getResults().getNumFound());
        List<Object> ids = new ArrayList<>();
        for (SolrDocument doc : response.getResults()) ids.add(doc.getFieldValue("id"));
        answer.put("ids", ids);
      }
      if (response.getFacetFields() != null) {
        Map<String, Object> facets = new LinkedHashMap<>();
        for (FacetField field : response.getFacetFields()) {
          Map<String, Object> counts = new LinkedHashMap<>();
          for (FacetField.Count c : field.getValues()) counts.put(c.getName(), c.getCount());
          facets.put(field.getName(), counts);
        }
        answer.put("facets", facets);
      }
      if (response.getNextCursorMark() != null) answer.put("nextCursorMark", response.getNextCursorMark());
      answer.put("response", response.getResponse());
    } catch (BaseHttpSolrClient.RemoteSolrException e) {
      answer.put("ok", false);
      answer.put("code", e.code());
      answer.put("message", String.valueOf(e.getMessage()));
    } catch (Exception e) {
      answer.put("ok", false);
      answer.put("code", -1);
      answer.put("message", e.getClass().getName() + ": " + e.getMessage());
    }
    return answer;
  }
}
