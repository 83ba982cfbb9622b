// The instance server's settings (application.server, http.* keys), bearer tokens, and the
// Prometheus text of the metrics registry.
#include <gtest/gtest.h>

#include "error_of.hpp"
#include "http/instance_server.hpp"
#include "http/server.hpp"
#include "sluice/config.hpp"
#include "sluice/metrics.hpp"

TEST(http_settings, application_server_is_host_and_port) {
  auto hp = sluice::http::parse_application_server("job-0.job.svc:8080");
  EXPECT_EQ(hp.host, "job-0.job.svc");
  EXPECT_EQ(hp.port, 8080);
  auto v6 = sluice::http::parse_application_server("[::1]:9000");
  EXPECT_EQ(v6.host, "::1");
  EXPECT_EQ(v6.port, 9000);
  for (const char* bad : {"host", "host:", ":80", "host:0", "host:65536", "host:8o"}) {
    auto e = sluice::test::error_of([&] { sluice::http::parse_application_server(bad); }, sluice::errc::invalid_config);
    EXPECT_NE(e.find("'application.server' has value '" + std::string(bad) + "'"), std::string::npos) << e;
  }
}

TEST(http_settings, defaults_bind_to_loopback_without_a_token) {
  sluice::config c;
  c.set("application.server", "localhost:7070");
  auto o = sluice::http::options_from_config(c);
  EXPECT_EQ(o.bind_address, "127.0.0.1");
  EXPECT_EQ(o.port, 7070);
  EXPECT_TRUE(o.auth_token.empty());
  EXPECT_EQ(o.max_connections, 512u);
  EXPECT_EQ(o.request_timeout, std::chrono::milliseconds(10000));
  c.set("http.request.timeout.ms", "0");
  sluice::test::error_of([&] { sluice::http::options_from_config(c); }, sluice::errc::invalid_config);
  c.set("http.request.timeout.ms", "100");
  c.set("http.max.connections", "0");
  sluice::test::error_of([&] { sluice::http::options_from_config(c); }, sluice::errc::invalid_config);
}

TEST(http_auth, only_the_exact_bearer_token_passes_and_probes_need_none) {
  EXPECT_TRUE(sluice::http::bearer_matches("Bearer s3cret", "s3cret"));
  EXPECT_FALSE(sluice::http::bearer_matches("Bearer s3cre", "s3cret"));
  EXPECT_FALSE(sluice::http::bearer_matches("Bearer s3cretx", "s3cret"));
  EXPECT_TRUE(sluice::http::bearer_matches("bearer s3cret", "s3cret"));  // the scheme's case is free (RFC 7235)
  EXPECT_TRUE(sluice::http::bearer_matches("BEARER s3cret", "s3cret"));
  EXPECT_FALSE(sluice::http::bearer_matches("Bearer S3cret", "s3cret"));  // the token's is not
  EXPECT_FALSE(sluice::http::bearer_matches("Bearerxs3cret", "s3cret"));
  EXPECT_FALSE(sluice::http::bearer_matches("Basic s3cret", "s3cret"));
  EXPECT_FALSE(sluice::http::bearer_matches("", "s3cret"));
  EXPECT_TRUE(sluice::http::is_unauthenticated_path("/health"));
  EXPECT_TRUE(sluice::http::is_unauthenticated_path("/ready"));
  EXPECT_FALSE(sluice::http::is_unauthenticated_path("/metrics"));
  EXPECT_FALSE(sluice::http::is_unauthenticated_path("/health/"));
}

TEST(http_metrics, prometheus_text_has_help_type_and_cumulative_buckets_in_seconds) {
  sluice::metrics_registry r;
  r.get_counter("sluice_records_processed_total", "thread=\"0\",task=\"0_1\"").add(1234567);
  r.get_gauge("sluice_consumer_lag_records", "thread=\"0\"").set(42);
  auto& h = r.get_histogram("sluice_commit_latency_ms", "thread=\"0\"");
  h.record(0);
  h.record(3);
  h.record(1000);
  r.set_help("job_widgets_total", "Widgets seen.");
  r.get_counter("job_widgets_total").add(2);
  auto text = r.prometheus_text();
  EXPECT_NE(text.find("# HELP sluice_records_processed_total "), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE sluice_records_processed_total counter\n"), std::string::npos) << text;
  EXPECT_NE(text.find("sluice_records_processed_total{thread=\"0\",task=\"0_1\"} 1234567\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE sluice_consumer_lag_records gauge\nsluice_consumer_lag_records{thread=\"0\"} 42\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# HELP job_widgets_total Widgets seen.\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("_ms"), std::string::npos) << "milliseconds are exposed as seconds\n" << text;
  EXPECT_NE(text.find("# TYPE sluice_commit_latency_seconds histogram\n"), std::string::npos) << text;
  EXPECT_NE(text.find("sluice_commit_latency_seconds_bucket{thread=\"0\",le=\"0\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("sluice_commit_latency_seconds_bucket{thread=\"0\",le=\"0.003\"} 2\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("sluice_commit_latency_seconds_bucket{thread=\"0\",le=\"+Inf\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("sluice_commit_latency_seconds_sum{thread=\"0\"} 1.003\n"), std::string::npos) << text;
  EXPECT_NE(text.find("sluice_commit_latency_seconds_count{thread=\"0\"} 3\n"), std::string::npos) << text;
}

TEST(http_metrics, process_metrics_report_cpu_and_resident_memory) {
  auto text = sluice::http::process_metrics_text();
  EXPECT_NE(text.find("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total "), std::string::npos)
      << text;
  auto rss = text.find("\nprocess_resident_memory_bytes ");
  ASSERT_NE(rss, std::string::npos) << text;
  EXPECT_GT(std::stod(text.substr(rss + std::string("\nprocess_resident_memory_bytes ").size())), 1e6) << text;
}
