// Command sharegroup is a franz-go (kgo) share-group consumer for moldau's interoperability tests.
//
// It joins the share group, consumes the topic and acknowledges every record explicitly: values listed in
// -reject are rejected, values listed in -release are released while their delivery count is below
// -release-until, every other record is accepted. With -hold it acknowledges nothing (for a kill -9 test). Each record is printed to stdout as one JSON line
// ({"offset", "value", "delivery_count", "ack"}) after its acknowledgement was flushed to the broker. It
// stops after -accept records were accepted, after -seconds or on SIGTERM, then leaves the group.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

type line struct {
	Offset        int64  `json:"offset"`
	Partition     int32  `json:"partition"`
	Value         string `json:"value"`
	DeliveryCount int32  `json:"delivery_count"`
	Ack           string `json:"ack"`
}

func set(csv string) map[string]bool {
	out := map[string]bool{}
	for _, v := range strings.Split(csv, ",") {
		if v != "" {
			out[v] = true
		}
	}
	return out
}

func main() {
	brokers := flag.String("brokers", "127.0.0.1:9092", "bootstrap servers, comma separated")
	group := flag.String("group", "", "share group")
	topic := flag.String("topic", "", "topic")
	release := flag.String("release", "", "values to release, comma separated")
	releaseUntil := flag.Int("release-until", 2, "release those values while their delivery count is below this")
	reject := flag.String("reject", "", "values to reject, comma separated")
	accept := flag.Int("accept", 0, "stop after this many accepted records (0: run for -seconds)")
	seconds := flag.Float64("seconds", 30, "stop after this many seconds")
	hold := flag.Float64("hold", 0, "print the first records fetched with ack \"hold\", acknowledge nothing and sleep this many seconds, then exit")
	maxRecords := flag.Int("max-records", 0, "ShareMaxRecords (0: the client's default)")
	flag.Parse()
	if *group == "" || *topic == "" {
		fmt.Fprintln(os.Stderr, "sharegroup: -group and -topic are required")
		os.Exit(2)
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(*brokers, ",")...),
		kgo.ShareGroup(*group),
		kgo.ConsumeTopics(*topic),
	}
	if *maxRecords > 0 {
		opts = append(opts, kgo.ShareMaxRecords(int32(*maxRecords)))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sharegroup:", err)
		os.Exit(1)
	}
	releaseSet, rejectSet := set(*release), set(*reject)
	enc := json.NewEncoder(os.Stdout)
	deadline := time.Now().Add(time.Duration(*seconds * float64(time.Second)))
	stop, stopCancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stopCancel()
	accepted := 0
	for stop.Err() == nil && time.Now().Before(deadline) && (*accept == 0 || accepted < *accept) {
		ctx, cancel := context.WithDeadline(stop, deadline)
		fetches := cl.PollFetches(ctx)
		cancel()
		fetches.EachError(func(t string, p int32, err error) {
			if err != context.DeadlineExceeded && err != context.Canceled {
				fmt.Fprintf(os.Stderr, "sharegroup: fetch error %s[%d]: %v\n", t, p, err)
			}
		})
		if *hold > 0 && fetches.NumRecords() > 0 {
			fetches.EachRecord(func(r *kgo.Record) {
				_ = enc.Encode(line{Offset: r.Offset, Partition: r.Partition, Value: string(r.Value),
					DeliveryCount: r.DeliveryCount(), Ack: "hold"})
			})
			time.Sleep(time.Duration(*hold * float64(time.Second)))
			os.Exit(0)
		}
		var out []line
		fetches.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			l := line{Offset: r.Offset, Partition: r.Partition, Value: v, DeliveryCount: r.DeliveryCount()}
			switch {
			case rejectSet[v]:
				r.Ack(kgo.AckReject)
				l.Ack = "reject"
			case releaseSet[v] && int(r.DeliveryCount()) < *releaseUntil:
				r.Ack(kgo.AckRelease)
				l.Ack = "release"
			default:
				r.Ack(kgo.AckAccept)
				l.Ack = "accept"
				accepted++
			}
			out = append(out, l)
		})
		if len(out) == 0 {
			continue
		}
		fctx, fcancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := cl.FlushAcks(fctx); err != nil {
			fmt.Fprintln(os.Stderr, "sharegroup: flush acks:", err)
		}
		fcancel()
		for _, l := range out {
			_ = enc.Encode(l)
		}
	}
	cl.Close() // leaves the group; records still acquired go back to the broker
}
