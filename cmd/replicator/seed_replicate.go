package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/replicate"
	"github.com/replicator-go/replicator/sink"
)

const seedReplicateDescription = `Publishes one content_replicate command to content.replicate (or --stream),
with a fresh ULID command_id: copy the blob at BLOB_URI, a blob_uri a
worker announced on content.blobs, to --destination in the store the
operator provisioned as --alias on the worker's host (its
REPLICATOR_REPLICATION_ALIASES_FILE). No credential travels in the command.
It prints:

  published command_id=<ULID> entry_id=<stream id> destination=<key>

As for fetch commands, publishing to content.replicate on database 0 (what
a running worker consumes) needs --production; --dry-run prints the frame
and connects to nothing. The destination is screened with the worker's own
object-key rules first: a command it would refuse invalid_destination is
never minted (exit 2).

With --watch it tails the fact stream (content.artifacts for
content.replicate, else <stream>.artifacts, or --facts-stream) with plain
XREAD, from a second before the command's entry id, until its
replication_complete or replication_failed.

Exit status: 0 when published and, with --watch, replication_complete; 1
when publishing or watching failed, the command failed, or the watch timed
out; 2 for usage errors and a refused target.`

func runSeedReplicate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("seed replicate", "seed replicate --alias A --destination KEY --info-source-id ID [--provider P] [--media-type T] [--redis-url URL] [--stream S] [--production] [--dry-run] [--watch] BLOB_URI", seedReplicateDescription, stderr)
	target := addSeedTarget(fs, streamReplicate, streamArtifacts, ".artifacts", "copies")
	alias := fs.String("alias", "", "credentials_alias: the provisioned store to write (required)")
	provider := fs.String("provider", replicate.ProviderGCS, "the alias's `provider`")
	destination := fs.String("destination", "", "the object `key` under the alias's root (required)")
	mediaType := fs.String("media-type", sink.DefaultMediaType, "the copy's content `type`")
	cacheControl := fs.String("cache-control", "", "gcs object option cache_control")
	disposition := fs.String("content-disposition", "", "gcs object option content_disposition")
	storageClass := fs.String("storage-class", "", "gcs object option storage_class")
	infoSource := fs.String("info-source-id", "", "info_source_id echoed on both facts (required)")
	repSpec := fs.String("info-item-rep-spec-id", "seed", "info_item_rep_spec_id echoed on both facts")
	revision := fs.String("source-revision-id", "seed", "source_revision_id echoed on both facts")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "replicator seed replicate: "+format+"\n", a...)
		return 2
	}
	switch {
	case fs.NArg() != 1:
		fs.Usage()
		return usageErr("want one BLOB_URI")
	case strings.TrimSpace(*alias) == "":
		return usageErr("--alias is required (a store provisioned on the worker's host)")
	case strings.TrimSpace(*infoSource) == "":
		return usageErr("--info-source-id is required (the issuer's id echoed on both facts)")
	case target.check() != "":
		return usageErr("%s", target.check())
	}
	if err := replicate.CheckDestination(*destination); err != nil {
		return usageErr("--destination: the worker would refuse it: %v", err)
	}
	var options map[string]any
	for name, v := range map[string]string{"cache_control": *cacheControl, "content_disposition": *disposition, "storage_class": *storageClass} {
		if v != "" {
			if options == nil {
				options = map[string]any{}
			}
			options[name] = v
		}
	}
	cmd := &envelope.ContentReplicate{
		SchemaVersion:     envelope.SchemaVersion,
		OccurredAt:        time.Now().UTC(),
		CommandID:         ulid.Make().String(),
		BlobURI:           fs.Arg(0),
		MediaType:         *mediaType,
		Provider:          *provider,
		CredentialsAlias:  *alias,
		Destination:       *destination,
		ObjectOptions:     options,
		InfoItemRepSpecID: *repSpec,
		SourceRevisionID:  *revision,
		InfoSourceID:      *infoSource,
	}
	if *target.dryRun {
		return printFrame(stdout, stderr, *target.stream, cmd)
	}
	client, code := target.connect("seed replicate", "a running worker will write this copy for real", stderr)
	if code != 0 {
		return code
	}
	defer client.Close()
	id, err := publish(ctx, client, *target.stream, cmd)
	if err != nil {
		return target.publishFailed("seed replicate", err, stderr, "publishing to %s failed", *target.stream)
	}
	fmt.Fprintf(stdout, "published command_id=%s entry_id=%s destination=%s\n", cmd.CommandID, id, kvValue(cmd.Destination))
	if !*target.watch {
		return 0
	}
	return watchFacts(ctx, client, *target.redisURL, target.factsStream(), watchCursor(id), []seedResult{{commandID: cmd.CommandID, entryID: id}}, target.watchTimeout.d, stdout, stderr)
}

// kvValue is v as kv renders a value.
func kvValue(v string) string { return strings.TrimPrefix(kv("", v), "=") }
