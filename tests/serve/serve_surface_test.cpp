// `handoff serve`'s surface beyond completions, through raw HTTP against the real binary:
// /tokenize and /detokenize, /version, /v1/models/{id}, request ids and X-Request-Id, CORS,
// random and fixed seeds, the API key from the environment, and vLLM's flag names.
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "../cli/cli_support.h"
#include "../text/text_test_support.h"
#include "handoff/text/tokenizer.h"
#include "handoff/version.h"
#include "serve_process.h"
#include "text_model.h"

namespace handoff::testing {
namespace {

using nlohmann::json;

std::string header_of(const std::string& response, const std::string& name) {
  const std::string head = response.substr(0, response.find("\r\n\r\n") + 2);
  const std::string key = "\r\n" + name + ": ";
  const size_t at = head.find(key);
  if (at == std::string::npos) return "";
  const size_t start = at + key.size();
  return head.substr(start, head.find("\r\n", start) - start);
}

json post_json(int port, const std::string& path, const json& body,
               const std::string& headers = "") {
  const std::string r = http(port, post_request(path, body.dump(), headers), milliseconds(30000));
  EXPECT_EQ(status_of(r), 200) << r;
  return json::parse(body_of(r), nullptr, false);
}

TEST(ServeSurface, TokenizeDetokenizeVersionAndModels) {
  if (!require_node_modules()) return;
  ServeProcess server("--max-model-len 512 --kv-cache-tokens 2048", small_text_model());
  ASSERT_GT(server.port(), 0) << server.log();
  const int port = server.port();
  const auto reference = text::Tokenizer::load(deepseek_v3_dir().string());

  const std::string text = "The café on 5th Street — ¿abierto? 東京 🚀";
  const json t = post_json(port, "/tokenize", {{"prompt", text}});
  EXPECT_EQ(t["tokens"].get<std::vector<int32_t>>(), reference->encode(text, true));
  EXPECT_EQ(t["count"], t["tokens"].size());
  EXPECT_EQ(t["max_model_len"], 512);
  const json d = post_json(port, "/detokenize", {{"tokens", t["tokens"]}});
  EXPECT_EQ(d["prompt"], "<｜begin▁of▁sentence｜>" + text);
  const json chat = post_json(port, "/tokenize",
                              {{"model", "handoff_surface_small_text"},
                               {"messages", {{{"role", "user"}, {"content", "Hi"}}}}});
  // The chat route prefills exactly these tokens.
  const json answer =
      post_json(port, "/v1/chat/completions",
                {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 1}});
  EXPECT_EQ(answer["usage"]["prompt_tokens"], chat["count"]);
  const std::string bad = http(port, post_request("/detokenize", json{{"tokens", {1, -5}}}.dump()));
  EXPECT_EQ(status_of(bad), 400) << bad;
  EXPECT_EQ(json::parse(body_of(bad))["error"]["param"], "tokens");

  const std::string version = get(port, "/version");
  ASSERT_EQ(status_of(version), 200) << version;
  EXPECT_EQ(json::parse(body_of(version))["version"], handoff::version());

  const std::string card = get(port, "/v1/models/handoff_surface_small_text");
  ASSERT_EQ(status_of(card), 200) << card;
  EXPECT_EQ(json::parse(body_of(card))["id"], "handoff_surface_small_text");
  EXPECT_EQ(json::parse(body_of(card))["object"], "model");
  const std::string missing = get(port, "/v1/models/gpt-4o");
  ASSERT_EQ(status_of(missing), 404) << missing;
  EXPECT_EQ(json::parse(body_of(missing))["error"]["code"], "model_not_found");
  EXPECT_NE(get(port, "/metrics").find("endpoint=\"/v1/models/{id}\",status=\"404\"} 1"),
            std::string::npos);
}

TEST(ServeSurface, SamplingIsRandomWithoutASeedAndRepeatsWithOne) {
  if (!require_node_modules()) return;
  ServeProcess server("--max-model-len 512 --kv-cache-tokens 2048", small_text_model());
  ASSERT_GT(server.port(), 0) << server.log();
  const json body = {{"prompt", "Once upon a time"},
                     {"max_tokens", 12},
                     {"temperature", 1.0},
                     {"ignore_eos", true}};
  const auto text_of = [&](const json& b) {
    return post_json(server.port(), "/v1/completions", b)["choices"][0]["text"].get<std::string>();
  };
  const std::string a = text_of(body), b = text_of(body);
  EXPECT_NE(a, b) << "two unseeded requests at temperature 1 sampled the same 12 tokens";
  json seeded = body;
  seeded["seed"] = 42;
  EXPECT_EQ(text_of(seeded), text_of(seeded));
}

TEST(ServeSurface, RequestIdsAreRandomAndXRequestIdIsEchoed) {
  ServeProcess server("");
  ASSERT_GT(server.port(), 0) << server.log();
  const std::string body = json{{"prompt", {1, 2, 3}}, {"max_tokens", 2}}.dump();
  const std::regex id_form("cmpl-[0-9a-f]{32}");
  std::set<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    const std::string r = http(server.port(), post_request("/v1/completions", body));
    ASSERT_EQ(status_of(r), 200) << r;
    const std::string id = json::parse(body_of(r))["id"];
    EXPECT_TRUE(std::regex_match(id, id_form)) << id;
    EXPECT_EQ("cmpl-" + header_of(r, "X-Request-Id"), id) << r;
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 3u);
  const std::string mine =
      http(server.port(), post_request("/v1/completions", body, "X-Request-Id: trace-77\r\n"));
  EXPECT_EQ(header_of(mine, "X-Request-Id"), "trace-77") << mine;
  EXPECT_EQ(json::parse(body_of(mine))["id"], "cmpl-trace-77");
  // Streams carry it too, and every chunk has the same id and a system_fingerprint.
  const std::string streamed =
      http(server.port(),
           post_request("/v1/completions",
                        json{{"prompt", {1, 2, 3}}, {"max_tokens", 2}, {"stream", true}}.dump(),
                        "X-Request-Id: s-1\r\n"));
  EXPECT_EQ(header_of(streamed, "X-Request-Id"), "s-1") << streamed;
  EXPECT_NE(streamed.find("\"id\":\"cmpl-s-1\""), std::string::npos) << streamed;
  EXPECT_NE(streamed.find("\"system_fingerprint\":\"fp_handoff-"), std::string::npos) << streamed;
  // Routes answered on the I/O thread echo it as well; a bad one is a 400 naming the header.
  EXPECT_EQ(header_of(get(server.port(), "/v1/models", "X-Request-Id: m-9\r\n"), "X-Request-Id"),
            "m-9");
  const std::string bad = http(
      server.port(),
      post_request("/v1/completions", body, "X-Request-Id: " + std::string(200, 'x') + "\r\n"));
  EXPECT_EQ(status_of(bad), 400) << bad;
  EXPECT_EQ(json::parse(body_of(bad))["error"]["param"], "X-Request-Id");
}

TEST(ServeSurface, CorsHeadersOnlyForAllowedOrigins) {
  {
    ServeProcess server(
        "--allowed-origins https://app.example,http://localhost:3000 "
        "--api-key k");
    ASSERT_GT(server.port(), 0) << server.log();
    const int port = server.port();
    const std::string auth = "Authorization: Bearer k\r\n";
    const std::string ok = get(port, "/v1/models", auth + "Origin: https://app.example\r\n");
    EXPECT_EQ(status_of(ok), 200) << ok;
    EXPECT_EQ(header_of(ok, "Access-Control-Allow-Origin"), "https://app.example") << ok;
    EXPECT_EQ(header_of(ok, "Vary"), "Origin");
    const std::string other = get(port, "/v1/models", auth + "Origin: https://evil.example\r\n");
    EXPECT_EQ(status_of(other), 200);
    EXPECT_EQ(header_of(other, "Access-Control-Allow-Origin"), "") << other;
    // The preflight needs no key and echoes the headers asked for.
    const std::string pre =
        http(port,
             "OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: t\r\n"
             "Origin: http://localhost:3000\r\n"
             "Access-Control-Request-Method: POST\r\n"
             "Access-Control-Request-Headers: authorization,content-type\r\n\r\n");
    EXPECT_EQ(status_of(pre), 200) << pre;
    EXPECT_EQ(header_of(pre, "Access-Control-Allow-Origin"), "http://localhost:3000");
    EXPECT_EQ(header_of(pre, "Access-Control-Allow-Headers"), "authorization,content-type");
    EXPECT_NE(header_of(pre, "Access-Control-Allow-Methods").find("POST"), std::string::npos);
    const std::string denied = http(port,
                                    "OPTIONS /v1/completions HTTP/1.1\r\nHost: t\r\n"
                                    "Origin: https://evil.example\r\n"
                                    "Access-Control-Request-Method: POST\r\n\r\n");
    EXPECT_EQ(status_of(denied), 403) << denied;
    EXPECT_EQ(header_of(denied, "Access-Control-Allow-Origin"), "");
    // A completion (answered on a worker) carries the header as well.
    const std::string done = http(
        port, post_request("/v1/completions", json{{"prompt", {1, 2}}, {"max_tokens", 1}}.dump(),
                           auth + "Origin: https://app.example\r\n"));
    EXPECT_EQ(status_of(done), 200) << done;
    EXPECT_EQ(header_of(done, "Access-Control-Allow-Origin"), "https://app.example");
  }
  {
    ServeProcess any("--allowed-origins '*'");
    ASSERT_GT(any.port(), 0) << any.log();
    EXPECT_EQ(header_of(get(any.port(), "/health", "Origin: https://x.example\r\n"),
                        "Access-Control-Allow-Origin"),
              "*");
  }
  {
    // Off by default: no CORS headers, and OPTIONS is no route.
    ServeProcess off("");
    ASSERT_GT(off.port(), 0) << off.log();
    EXPECT_EQ(header_of(get(off.port(), "/v1/models", "Origin: https://app.example\r\n"),
                        "Access-Control-Allow-Origin"),
              "");
    EXPECT_EQ(status_of(http(off.port(),
                             "OPTIONS /v1/models HTTP/1.1\r\nHost: t\r\n"
                             "Origin: https://app.example\r\n\r\n")),
              404);
  }
  const auto r = run_handoff("serve --model " + kServeModel + " --allowed-origins app.example");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--allowed-origins: 'app.example' is not an origin"), std::string::npos)
      << r.output;
}

TEST(ServeSurface, ApiKeyFromTheEnvironment) {
  ::setenv("HANDOFF_API_KEY", "from-env", 1);
  ServeProcess server("");
  ::unsetenv("HANDOFF_API_KEY");
  ASSERT_GT(server.port(), 0) << server.log();
  EXPECT_EQ(status_of(get(server.port(), "/v1/models")), 401);
  EXPECT_EQ(status_of(get(server.port(), "/v1/models", "Authorization: Bearer from-env\r\n")), 200);
}

TEST(ServeSurface, VllmParallelFlagNames) {
  const std::string plan = "plan --config " + std::string(HANDOFF_TEST_DATA) +
                           "/golden/dsv32_small_bf16/config.json --sp on --tokens 5 --json ";
  const auto ours = run_handoff(plan + "--tp 2 --pp 2");
  const auto vllm = run_handoff(plan + "--tensor-parallel-size 2 --pipeline-parallel-size 2");
  ASSERT_EQ(ours.exit_code, 0) << ours.output;
  EXPECT_EQ(vllm.exit_code, 0) << vllm.output;
  EXPECT_EQ(vllm.output, ours.output);
  const auto over = run_handoff(plan + "--tensor-parallel-size 2 --pipeline-parallel-size 7");
  EXPECT_EQ(over.exit_code, 2) << over.output;
  EXPECT_NE(over.output.find("pp = 7 stages"), std::string::npos) << over.output;
}

}  // namespace
}  // namespace handoff::testing
