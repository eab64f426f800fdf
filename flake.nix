{
  description = "Task Executor (taskexec): setTimeout and setInterval as a service";

  inputs = {
    nixpkgs.url = "github:NixOS/nixpkgs/nixos-24.11";
    rust-overlay = {
      url = "github:oxalica/rust-overlay";
      inputs.nixpkgs.follows = "nixpkgs";
    };
    flake-utils.url = "github:numtide/flake-utils";
  };

  outputs = { self, nixpkgs, rust-overlay, flake-utils }:
    flake-utils.lib.eachDefaultSystem (system:
      let
        pkgs = import nixpkgs { inherit system; overlays = [ (import rust-overlay) ]; };
        # The toolchain with the target plugins are built for.
        rust = pkgs.rust-bin.stable.latest.default.override {
          extensions = [ "rust-src" "clippy" "rustfmt" ];
          targets = [ "wasm32-wasip2" ];
        };
        # What librdkafka's bundled build (rdkafka-sys) and the SQLite/TLS crates need.
        nativeBuildInputs = with pkgs; [ pkg-config cmake perl python3 ];
        buildInputs = with pkgs; [ openssl zlib zstd cyrus_sasl ];
      in
      {
        packages.default = pkgs.rustPlatform.buildRustPackage {
          pname = "taskexec";
          version = "0.1.0";
          src = ./.;
          cargoLock.lockFile = ./Cargo.lock;
          cargoBuildFlags = [ "-p" "taskexec" ];
          # The end-to-end tests need PostgreSQL and Redis servers; run them with scripts/test.
          doCheck = false;
          inherit nativeBuildInputs buildInputs;
        };

        devShells.default = pkgs.mkShell {
          packages = [ rust pkgs.cargo-nextest pkgs.postgresql_16 pkgs.redis pkgs.curl pkgs.jq ] ++ nativeBuildInputs ++ buildInputs;
          shellHook = ''
            echo "taskexec dev shell: scripts/test runs the suite (start PostgreSQL and Redis first, or let it)."
          '';
        };
      });
}
