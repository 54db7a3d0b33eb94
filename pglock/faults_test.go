package pglock_test

import (
	"testing"

	"github.com/dlock/dlock/internal/sqltest"
)

func TestLongWaitLeaseIsLive(t *testing.T)       { sqltest.LongWaitLeaseIsLive(t, sqlBackend(t)) }
func TestBlackholedHolderFreed(t *testing.T)     { sqltest.BlackholedHolderFreed(t, sqlBackend(t)) }
func TestBlackholedUnlockReturns(t *testing.T)   { sqltest.BlackholedUnlockReturns(t, sqlBackend(t)) }
func TestBlackholedWaiterFreed(t *testing.T)     { sqltest.BlackholedWaiterFreed(t, sqlBackend(t)) }
func TestExtendOutlastsGrantTTL(t *testing.T)    { sqltest.ExtendOutlastsGrantTTL(t, sqlBackend(t)) }
func TestExtendCtxEndsMidStatement(t *testing.T) { sqltest.ExtendCtxEndsMidStatement(t, sqlBackend(t)) }
func TestUnlockCutsCheckShort(t *testing.T)      { sqltest.UnlockCutsCheckShort(t, sqlBackend(t)) }
