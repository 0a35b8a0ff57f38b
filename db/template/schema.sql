-- For sqlc only (never migrated): the schema workq's SQL is written in.
-- The migrator creates the schema the user chose (migrate.Options.Schema)
-- before the first migration, because it also holds the version table.
create schema workq;
