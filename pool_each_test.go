package sbx_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sbxrun/sbx"
)

// twoPools is a Pools of pools a and b whose op fails on "bad".
type twoPools struct{ sbx.Pools }

func (twoPools) ListPools(ctx context.Context) ([]*sbx.Pool, error) {
	return []*sbx.Pool{{PoolSpec: sbx.PoolSpec{Name: "a"}}, {PoolSpec: sbx.PoolSpec{Name: "b"}}}, nil
}

func fill(p sbx.Pools, ctx context.Context, name string) (*sbx.PoolReport, error) {
	if name == "bad" {
		return nil, errors.New("no such pool")
	}
	return &sbx.PoolReport{Started: []string{name + "1"}}, nil
}

func TestEachPool(t *testing.T) {
	var seen []string
	report := func(n string, rep *sbx.PoolReport) { seen = append(seen, n+":"+strings.Join(rep.Started, ",")) }
	if err := sbx.EachPool(context.Background(), twoPools{}, nil, fill, report); err != nil || strings.Join(seen, " ") != "a:a1 b:b1" {
		t.Errorf("every pool: %v %v", err, seen)
	}
	seen = nil
	err := sbx.EachPool(context.Background(), twoPools{}, []string{"b", "bad", "a"}, fill, report)
	if err == nil || err.Error() != "pool bad: no such pool" || strings.Join(seen, " ") != "b:b1" {
		t.Errorf("named pools: %v %v", err, seen)
	}
}
