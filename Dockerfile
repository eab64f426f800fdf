# The taskexec binary in a small Debian image. Used by docker-compose.yml.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release -p taskexec && cp target/release/taskexec /usr/local/bin/taskexec

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates curl libssl3 && rm -rf /var/lib/apt/lists/* \
    && useradd --system --home /var/lib/taskexec --create-home taskexec
COPY --from=build /usr/local/bin/taskexec /usr/local/bin/taskexec
USER taskexec
WORKDIR /var/lib/taskexec
EXPOSE 8080
ENTRYPOINT ["taskexec"]
CMD ["serve"]
